"""An unknown WebSocket path is refused with 404 and the JSON error body (it used to be a 500 with a
traceback): through the ASGI application, and end to end through uvicorn."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from asgiref.sync import async_to_sync
from channels.testing import ApplicationCommunicator
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from tests.pipeline.runtime.fixtures import REPO, pipeline_env, wait_for  # noqa: F401


def scope(path: str, *, denial: bool) -> dict:
    return {
        "type": "websocket",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": [(b"host", b"127.0.0.1")],
        "subprotocols": [],
        "extensions": {"websocket.http.response": {}} if denial else {},
    }


def handshake(path: str, *, denial: bool) -> list[dict]:
    from eigenflux.asgi import application

    async def run() -> list[dict]:
        communicator = ApplicationCommunicator(application, scope(path, denial=denial))
        await communicator.send_input({"type": "websocket.connect"})
        messages = [await communicator.receive_output(5)]
        if messages[0]["type"] == "websocket.http.response.start":
            messages.append(await communicator.receive_output(5))
        await communicator.wait(5)
        return messages

    return async_to_sync(run)()


def test_unknown_path_is_denied_with_404_and_the_json_error_body():
    start, body = handshake("/ws/v1/nope", denial=True)
    assert start["type"] == "websocket.http.response.start"
    assert start["status"] == 404
    assert (b"content-type", b"application/json") in start["headers"]
    assert json.loads(body["body"]) == {
        "error": {"code": "not_found", "message": "no WebSocket endpoint at /ws/v1/nope"}
    }


def test_without_the_denial_extension_the_handshake_is_refused():
    (message,) = handshake("/anything", denial=False)
    assert message == {"type": "websocket.close", "code": 1008}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def uvicorn_server(pipeline_env):  # noqa: F811
    port = free_port()
    log = tempfile.NamedTemporaryFile(prefix="uvicorn-", suffix=".log", delete=False)  # noqa: SIM115
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "eigenflux.asgi:application", "--host", "127.0.0.1", "--port", str(port)],
        cwd=REPO,
        env=pipeline_env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )

    def listening() -> bool:
        with socket.socket() as sock:
            return sock.connect_ex(("127.0.0.1", port)) == 0

    try:
        wait_for(listening, 60, 0.1, "uvicorn to listen")
        yield port, Path(log.name)
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:  # a loaded machine: do not leave it holding the test database
            proc.kill()
            proc.wait(15)
        log.close()
        Path(log.name).unlink()


@pytest.mark.slow
def test_uvicorn_answers_an_unknown_websocket_path_with_404(uvicorn_server):
    port, log = uvicorn_server
    with pytest.raises(InvalidStatus) as refused:
        connect(f"ws://127.0.0.1:{port}/ws/v1/unknown", open_timeout=10)
    response = refused.value.response
    assert response.status_code == 404
    assert json.loads(response.body)["error"]["code"] == "not_found"
    # The known route still works: a bad token is accepted, told why, and closed with 4401.
    with connect(f"ws://127.0.0.1:{port}/ws/v1/events?token=ef_nope", open_timeout=10) as socket_:
        assert json.loads(socket_.recv(10))["error"]["code"] == "unauthorized"
    assert "Traceback" not in log.read_text()
