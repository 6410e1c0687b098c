"""Real web servers for tests: uvicorn exactly as `make run` starts it (or gunicorn for WSGI), on a free
loopback port, against the test database and this test's Redis database. Output goes to a file."""

from __future__ import annotations

import base64
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from eigenflux.devstack import web_command
from items.events_socket import BEARER_SUBPROTOCOL_PREFIX, SUBPROTOCOL
from tests.pipeline.runtime.fixtures import database_url

REPO = Path(__file__).resolve().parents[2]
SERVER_APPLICATION_NAME = "eigenflux-web-under-test"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class WebServer:
    def __init__(self, command: list[str], env: dict[str, str], port: int):
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self._log = tempfile.NamedTemporaryFile(prefix="web-", suffix=".log", delete=False)  # noqa: SIM115
        self.proc = subprocess.Popen(
            command, cwd=REPO, env=env, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                pytest.fail(f"web server did not start; output:\n{self.output()[-3000:]}")
            time.sleep(0.1)

    def output(self) -> str:
        return Path(self._log.name).read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    def close(self) -> None:
        self.stop()
        self._log.close()
        os.unlink(self._log.name)


@pytest.fixture
def web_env(transactional_db, settings) -> dict[str, str]:
    from django.db import connection

    return {
        **os.environ,
        "DATABASE_URL": database_url(connection.settings_dict),
        "REDIS_URL": settings.REDIS_URL,
        "PYTHONUNBUFFERED": "1",
        # Tells its connections apart from the test process's own in pg_stat_activity.
        "DB_APPLICATION_NAME": SERVER_APPLICATION_NAME,
    }


@pytest.fixture
def web_server(web_env):
    """start(wsgi=False, **env) -> WebServer; uvicorn as `make run` runs it (gunicorn with wsgi=True)."""
    started: list[WebServer] = []

    def start(*, wsgi: bool = False, **env: str) -> WebServer:
        port = free_port()
        if wsgi:
            command = [sys.executable, "-m", "gunicorn", "eigenflux.wsgi:application", "-b", f"127.0.0.1:{port}"]
        else:
            command = web_command("127.0.0.1", str(port))
        server = WebServer(command, {**web_env, **env}, port)
        started.append(server)
        return server

    yield start
    for server in started:
        server.close()


def refused_and_dropped(port: int) -> None:
    """A handshake offering a bad bearer token, the connection closed as soon as it is written."""
    key = base64.b64encode(os.urandom(16)).decode()
    request = (
        "GET /ws/v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
        f"Sec-WebSocket-Protocol: {SUBPROTOCOL}, {BEARER_SUBPROTOCOL_PREFIX}ef_bad\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(request.encode())


def refused_and_closed(url: str) -> None:
    """The same through a WebSocket client that closes right after the handshake."""
    try:
        with connect(url, subprotocols=[SUBPROTOCOL, f"{BEARER_SUBPROTOCOL_PREFIX}ef_bad"], open_timeout=30):
            pass
    except ConnectionClosed:
        pass


def refused_websockets(port: int, count: int) -> None:
    """`count` agent WebSockets offering a bad bearer token, half dropped mid-handshake, half closed at once."""
    for _ in range(count // 2):
        refused_and_dropped(port)
        refused_and_closed(f"ws://127.0.0.1:{port}/ws/v1/events")
