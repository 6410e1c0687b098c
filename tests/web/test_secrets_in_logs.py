"""No token in any log line of any process `make run` starts: the stack runs exactly as `make run` runs it
(eigenflux.devstack: web, pipeline, job worker), a WebSocket session is opened with a token in the query
string and in the subprotocol header, the token is used over HTTP too and then revoked (which closes the
open sockets with 4401), and everything every process wrote is searched for it."""

from __future__ import annotations

import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect as ws_connect

from items.models import AgentToken
from items.services.agents import agent_token_revoke
from tests.factories import make_agent
from tests.pipeline.runtime.fixtures import wait_for
from tests.web.servers import REPO, free_port

pytestmark = pytest.mark.slow


def test_no_token_appears_in_any_log_of_make_run(web_env):
    port, metrics_port = free_port(), free_port()
    log = tempfile.NamedTemporaryFile(prefix="make-run-", suffix=".log", delete=False)  # noqa: SIM115
    env = {**web_env, "PORT": str(port), "PIPELINE_METRICS_PORT": str(metrics_port), "LOG_LEVEL": "DEBUG"}
    env.pop("DB_APPLICATION_NAME")
    stack = subprocess.Popen(
        [sys.executable, "-m", "eigenflux.devstack"], cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT
    )
    base = f"http://127.0.0.1:{port}"
    agent, token = make_agent()
    try:
        wait_for(
            lambda: _ready(base) or stack.poll() is not None,
            timeout=180,
            interval=0.2,
            message="make run's web server",
        )
        assert stack.poll() is None, Path(log.name).read_text(errors="replace")[-4000:]
        time.sleep(2)  # the pipeline and the job worker are up too
        headers = {"Authorization": f"Bearer {token}"}
        assert httpx.get(f"{base}/api/v1/agents/me", headers=headers).status_code == 200
        assert httpx.get(f"{base}/api/v1/feed?token={token}", headers=headers).status_code == 200
        assert httpx.get(f"{base}/api/v1/no-such-thing?token={token}").status_code == 404
        assert httpx.get(f"{base}/api/v1/agents/me", headers={"Authorization": f"Bearer {token}x"}).status_code == 401
        with (
            ws_connect(f"ws://127.0.0.1:{port}/ws/v1/events?token={token}", open_timeout=10) as by_query,
            ws_connect(
                f"ws://127.0.0.1:{port}/ws/v1/events",
                subprotocols=["eigenflux.v1", f"eigenflux.bearer.{token}"],
                open_timeout=10,
            ) as by_header,
        ):
            assert by_header.subprotocol == "eigenflux.v1"
            for socket in (by_query, by_header):
                with pytest.raises(TimeoutError):
                    socket.recv(timeout=0.5)  # open and quiet
            agent_token_revoke(token=AgentToken.objects.get(agent=agent))
            for socket in (by_query, by_header):
                assert '"the token was revoked"' in socket.recv(timeout=5)
                with pytest.raises(ConnectionClosed) as closed:
                    socket.recv(timeout=5)
                assert closed.value.rcvd.code == 4401
    finally:
        stack.send_signal(signal.SIGINT)
        try:
            stack.wait(60)
        except subprocess.TimeoutExpired:
            stack.kill()
            stack.wait(10)
        log.close()
    output = Path(log.name).read_text(errors="replace")
    Path(log.name).unlink()
    assert "WebSocket /ws/v1/events?[redacted]" in output  # uvicorn did log the socket; it was redacted
    assert "run_pipeline settings" in output and "Worker" in output  # every process wrote to this log
    assert token not in output
    assert token[3:] not in output
    assert token[3:20] not in output


def _ready(base: str) -> bool:
    try:
        return httpx.get(f"{base}/readyz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False
