"""Fixtures that drive real `manage.py run_pipeline` processes against the test database and test Redis.

Reusable: `from tests.pipeline.runtime.fixtures import pipeline_env, run_pipeline  # noqa: F401` in a conftest.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

import pytest

REPO = Path(__file__).resolve().parents[3]


def database_url(settings_dict: dict) -> str:
    """A DATABASE_URL for the database Django is connected to (the test database inside a test)."""
    user = quote(settings_dict.get("USER") or "", safe="")
    password = settings_dict.get("PASSWORD") or ""
    auth = f"{user}:{quote(password, safe='')}@" if password else (f"{user}@" if user else "")
    host = quote(settings_dict.get("HOST") or "", safe="")
    port = f":{settings_dict['PORT']}" if settings_dict.get("PORT") else ""
    return f"postgresql://{auth}{host}{port}/{quote(settings_dict['NAME'], safe='')}"


def wait_for(predicate: Callable[[], object], timeout: float, interval: float = 0.05, message: str = "") -> object:
    """Poll until predicate() is truthy; fail the test after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {message or predicate}")
        time.sleep(interval)


class PipelineProcess:
    """A running `manage.py run_pipeline`; output goes to a temp file (read with .output())."""

    def __init__(self, args: list[str], env: dict[str, str]):
        self.args = args
        self._log = tempfile.NamedTemporaryFile(prefix="run_pipeline-", suffix=".log", delete=False)  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, str(REPO / "manage.py"), "run_pipeline", *args],
            cwd=REPO,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def output(self) -> str:
        return Path(self._log.name).read_text(errors="replace")

    def wait(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(f"run_pipeline {self.args} did not exit within {timeout}s; output:\n{self.output()[-4000:]}")

    def signal(self, signum: int) -> None:
        if signum in (signal.SIGTERM, signal.SIGINT):
            from pipeline.management.commands.run_pipeline import READY_LINE

            # Before its handlers are installed a child dies of the signal instead of draining: wait for them.
            deadline = time.monotonic() + 60
            while READY_LINE not in self.output() and self.proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
        if self.proc.poll() is None:
            self.proc.send_signal(signum)

    def terminate(self) -> None:
        self.signal(signal.SIGTERM)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def close(self) -> None:
        self.kill()
        self._log.close()
        os.unlink(self._log.name)


@pytest.fixture
def pipeline_env(transactional_db, settings) -> dict[str, str]:
    """Environment for run_pipeline subprocesses: the test database and this test's Redis db, never the
    embedded defaults. Tests may add PIPELINE_* knobs to a copy."""
    from django.db import connection

    env = {k: v for k, v in os.environ.items() if not k.startswith("PIPELINE_")}
    env.update(
        DATABASE_URL=database_url(connection.settings_dict),
        REDIS_URL=settings.REDIS_URL,
        PIPELINE_METRICS_PORT="0",
        PYTHONUNBUFFERED="1",
        DB_CONN_MAX_AGE="600",
    )
    return env


@pytest.fixture
def run_pipeline(pipeline_env) -> Callable[..., PipelineProcess]:
    """start(*args, env=None) -> PipelineProcess; every process is killed at teardown."""
    started: list[PipelineProcess] = []

    def start(*args: str, env: dict[str, str] | None = None) -> PipelineProcess:
        process = PipelineProcess(list(args), {**pipeline_env, **(env or {})})
        started.append(process)
        return process

    yield start
    for process in started:
        process.close()
