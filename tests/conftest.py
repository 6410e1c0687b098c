"""Test harness: real PostgreSQL (pytest-django's test database) and real Redis (a dedicated db, flushed
per test). Both are the embedded servers unless DATABASE_URL / REDIS_URL are set."""

from __future__ import annotations

import os
import platform
import sys
import threading
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import pytest
from django.test import Client

from eigenflux.base.redis import get_redis
from eigenflux.settings import channel_layers

# Shared fixtures live beside the fakes they drive (e.g. the OpenAI-compatible fake server).
pytest_plugins = ["tests.fakes.fixtures"]

# --- the environment, unchanged by collection --------------------------------------------------------------
# A module that sets os.environ when it is imported (a bench script does, for its own process) would reach every
# process a later test starts, the runs of `-m slow` included (pytest imports every module to collect it): a
# devstack test once ran the offline analyzer because a test imported such a bench. Collection must leave the
# environment as it found it.
_ENVIRONMENT = dict(os.environ)


def pytest_collection_finish(session):
    changed = sorted(key for key in {*_ENVIRONMENT, *os.environ} if _ENVIRONMENT.get(key) != os.environ.get(key))
    if changed:
        raise pytest.UsageError(
            f"importing the test modules changed the environment ({', '.join(changed)}): a module sets os.environ "
            "at import (a bench script?); import what the test needs from a module without side effects"
        )


# --- the `slow` marker, enforced ---------------------------------------------------------------------------
# `make test-fast` runs every test not marked slow. A test that starts a process or sleeps more than a second in
# total (on the main thread) must be marked slow: an audit hook sees every process start and every sleep, and
# such a test fails when it is not marked. Processes started by shared fixtures during set-up are not counted.
SLEEP_BUDGET_SECONDS = 1.0
_SPAWN_EVENTS = frozenset({"subprocess.Popen", "os.posix_spawn", "os.fork", "os.forkpty", "os.system", "os.exec"})


@dataclass
class _Watch:
    spawned: list[str] = field(default_factory=list)
    slept: float = 0.0


_watch: _Watch | None = None


def _audit(event: str, args: tuple) -> None:
    watch = _watch
    if watch is None:
        return
    if event in _SPAWN_EVENTS:
        watch.spawned.append(f"{event} {str(args[:2])[:200]}")
    elif event == "time.sleep" and threading.current_thread() is threading.main_thread():
        watch.slept += args[0] or 0.0


sys.addaudithook(_audit)
# The standard library's platform.processor() runs `uname -p` once per process, lazily, from whichever test first
# loads a library that asks (the local embedding model's stack does): ask it here, so no test is charged for it.
platform.processor()


# Fixtures that start processes (run_pipeline, web servers, Redis Cluster, PgBouncer, a streaming replica): every
# test using one is slow, marked here so that no module can forget it.
PROCESS_FIXTURES = frozenset(
    {"run_pipeline", "enrich", "web_server", "redis_cluster", "pgbouncer", "streaming_replica"}
)


@pytest.hookimpl(tryfirst=True)  # before `-m "not slow"` deselects
def pytest_collection_modifyitems(items):
    for item in items:
        if PROCESS_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    global _watch
    if item.get_closest_marker("slow") is not None:
        return (yield)
    _watch = watch = _Watch()
    try:
        result = yield
    finally:
        _watch = None
    if watch.spawned:
        pytest.fail(f"started a process but is not marked slow (@pytest.mark.slow): {watch.spawned[0]}")
    if watch.slept > SLEEP_BUDGET_SECONDS:
        pytest.fail(f"slept {watch.slept:.1f}s but is not marked slow (@pytest.mark.slow)")
    return result


# Redis logical database for tests; parallel runs against one server can choose different ones. Under
# pytest-xdist each worker (gw0, gw1 ...) takes the next one up, as pytest-django gives it a database of its own
# (test_postgres_gw0 ...); the embedded Redis has 32 databases.
_XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
TEST_REDIS_DB = int(os.environ.get("TEST_REDIS_DB", "15")) + (int(_XDIST_WORKER[2:]) if _XDIST_WORKER else 0)


def redis_url_with_db(url: str, db: int) -> str:
    parts = urlsplit(url)
    if parts.scheme == "unix":
        query = dict(parse_qsl(parts.query))
        query["db"] = str(db)
        return f"unix://{parts.path}?{urlencode(query)}"
    return urlunsplit(parts._replace(path=f"/{db}"))


@pytest.fixture(autouse=True)
def _redis_isolated(settings):
    """Every test gets an empty Redis database of its own, by URL, so subprocesses can use it too."""
    url = redis_url_with_db(settings.REDIS_URL, TEST_REDIS_DB)
    settings.REDIS_URL = url
    settings.RQ_QUEUES = {"default": {"URL": url, "DEFAULT_TIMEOUT": 300}}
    settings.CHANNEL_LAYERS = channel_layers([url])
    client = get_redis(url)
    client.flushdb()
    yield client
    client.flushdb()


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    """Tests hash passwords with a cheap hasher: the production one costs most of a second per login on 2 cores,
    which no test here is about (the throttle tests log in a dozen times)."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _auth_caches_cleared():
    """The in-process memory of unknown tokens, blocked addresses and the active ranker model starts empty in
    every test."""
    from items.authentication import unknown_tokens
    from items.ranker.serving import ranker_cache_clear
    from items.ratelimit import blocked_addresses_clear

    unknown_tokens.clear()
    blocked_addresses_clear()
    ranker_cache_clear()  # the learned ranker a test activated is forgotten with its database rows
    yield
    unknown_tokens.clear()
    blocked_addresses_clear()


@pytest.fixture(autouse=True)
def _rate_limit_window_pinned(monkeypatch):
    """Each test counts in one fixed rate-limit window (the one it starts in): a test making three requests
    against a limit of two would otherwise pass its limit in two windows when it straddles a minute boundary."""
    from items import ratelimit

    windows: dict[int, int] = {}
    real = ratelimit.current_window
    monkeypatch.setattr(ratelimit, "current_window", lambda seconds: windows.setdefault(seconds, real(seconds)))


@pytest.fixture
def redis_client(_redis_isolated):
    return _redis_isolated


@pytest.fixture
def agent_and_token(db):
    from tests.factories import make_agent

    return make_agent()


@pytest.fixture
def api_client(agent_and_token) -> Client:
    """A test client that sends the agent's bearer token on every request."""
    _, token = agent_and_token
    return Client(HTTP_AUTHORIZATION=f"Bearer {token}")
