"""Fixtures for the fakes in this package: `fake_llm` runs the OpenAI-compatible fake server and points
settings at it (main, safety and embedding clients, each with its own key and model)."""

from __future__ import annotations

import pytest

from tests.fakes.openai_server import FakeOpenAIServer

MAIN_KEY = "sk-fake-main"
SAFETY_KEY = "sk-fake-safety"
EMBEDDING_KEY = "sk-fake-embedding"
MAIN_MODEL = "fake-main"
SAFETY_MODEL = "fake-safety"
EMBEDDING_MODEL = "fake-embedding"


class FakeLLM:
    """The running fake server plus the settings/env that point at it."""

    def __init__(self, server: FakeOpenAIServer):
        self.server = server

    def __getattr__(self, name: str):  # script(), count(), requests, ... come from the server
        return getattr(self.server, name)

    def settings_values(self) -> dict[str, object]:
        return {
            "LLM_PROVIDER": "openai",
            "LLM_BASE_URL": self.server.url,
            "LLM_API_KEY": MAIN_KEY,
            "LLM_MODEL": MAIN_MODEL,
            "LLM_API": "responses",
            "LLM_REASONING_EFFORT": "",
            "LLM_REASONING_EFFORT_BY_PROMPT": {},
            "LLM_TIMEOUT": 5.0,
            "LLM_MAX_RETRIES": 2,
            "LLM_RETRY_BASE_DELAY": 0.01,
            "LLM_RETRY_MAX_DELAY": 0.05,
            "SAFETY_LLM_BASE_URL": self.server.url,
            "SAFETY_LLM_API_KEY": SAFETY_KEY,
            "SAFETY_LLM_MODEL": SAFETY_MODEL,
            "SAFETY_LLM_REASONING_EFFORT": "",
            "EMBEDDING_BASE_URL": self.server.url,
            "EMBEDDING_API_KEY": EMBEDDING_KEY,
            "EMBEDDING_MODEL": EMBEDDING_MODEL,
        }

    def env(self) -> dict[str, str]:
        """Environment variables that point a subprocess (e.g. `manage.py run_pipeline`) at this server."""
        env = {}
        for key, value in self.settings_values().items():
            if isinstance(value, dict):
                env[key] = ",".join(f"{name}={effort}" for name, effort in value.items())
            else:
                env[key] = str(value)
        return env


@pytest.fixture
def fake_llm(settings):
    """A fresh fake OpenAI-compatible server on 127.0.0.1 (free port) with settings pointed at it."""
    server = FakeOpenAIServer(safety_model=SAFETY_MODEL).start()
    fake = FakeLLM(server)
    for key, value in fake.settings_values().items():
        setattr(settings, key, value)
    try:
        yield fake
    finally:
        server.stop()


@pytest.fixture
def postgres_proxy(transactional_db):
    """A TcpProxy in front of the test database; `.database_url` points a subprocess through it, so the test
    can take PostgreSQL "down" for that process while keeping its own connection."""
    import os

    from django.db import connection

    from tests.fakes.tcp_proxy import TcpProxy
    from tests.pipeline.runtime.fixtures import database_url

    params = connection.settings_dict
    host, port = params.get("HOST") or "", str(params.get("PORT") or "5432")
    # The embedded server listens on a unix socket in HOST; an external one on host:port.
    target = os.path.join(host, f".s.PGSQL.{port}") if host.startswith("/") else (host or "127.0.0.1", int(port))
    proxy = TcpProxy(target).start()
    proxy.database_url = database_url({**params, "HOST": "127.0.0.1", "PORT": str(proxy.port)})
    try:
        yield proxy
    finally:
        proxy.stop()
