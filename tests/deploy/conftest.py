"""A real web process (uvicorn serving eigenflux.asgi, as deployed) against the test database and Redis."""

from __future__ import annotations

import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.pipeline.runtime.fixtures import REPO, pipeline_env, run_pipeline, wait_for  # noqa: F401 - fixtures


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class WebProcess:
    proc: subprocess.Popen
    port: int
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:  # a loaded machine: do not leave it holding the test database
                self.proc.kill()
                self.proc.wait(15)


@pytest.fixture
def web_server(pipeline_env) -> Callable[..., WebProcess]:  # noqa: F811
    """start(env=None) -> WebProcess listening on a free port; stopped at teardown."""
    started: list[WebProcess] = []

    def start(env: dict[str, str] | None = None) -> WebProcess:
        port = free_port()
        log = Path(tempfile.NamedTemporaryFile(prefix="uvicorn-", suffix=".log", delete=False).name)  # noqa: SIM115
        with log.open("w") as out:
            command = ["uvicorn", "eigenflux.asgi:application", "--host", "127.0.0.1", "--port", str(port)]
            proc = subprocess.Popen(
                [sys.executable, "-m", *command, "--no-access-log"],
                cwd=REPO,
                env={**pipeline_env, **(env or {})},
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        web = WebProcess(proc, port, log)
        started.append(web)

        def listening() -> bool:
            if proc.poll() is not None:
                pytest.fail(f"uvicorn exited with {proc.returncode}:\n{web.output()[-4000:]}")
            with socket.socket() as sock:
                return sock.connect_ex(("127.0.0.1", port)) == 0

        wait_for(listening, 60, 0.1, "uvicorn to listen")
        return web

    yield start
    for web in started:
        web.stop()
        web.log.unlink(missing_ok=True)
