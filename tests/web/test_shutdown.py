"""Stopping the web server after WebSockets were refused (a bad bearer subprotocol, the client gone at once):
nothing they started is left for uvicorn's shutdown to wait on, so SIGINT or SIGTERM ends it cleanly within the
documented bound (docs/operations.md, "`make run`"). It used to wait for ever ("Waiting for background tasks to
complete") on the channel-layer receive of a consumer whose cancellation was lost (eigenflux/base/channel_layer.py)."""

from __future__ import annotations

import signal

import pytest

from tests.web.servers import refused_websockets

# docs/operations.md: `make run` gives its children PIPELINE_GRACE_SECONDS + 10 s (30 s by default) to stop.
SHUTDOWN_BOUND_SECONDS = 30
REFUSED_SOCKETS = 8  # the lost cancellation is a race: several refusals make meeting it (before the fix) likely


@pytest.mark.parametrize(
    ("signum", "clean_status"), [(signal.SIGINT, 0), (signal.SIGTERM, -signal.SIGTERM)], ids=["SIGINT", "SIGTERM"]
)
def test_refused_websockets_do_not_hold_up_the_shutdown(web_server, signum, clean_status):
    server = web_server()
    refused_websockets(server.port, REFUSED_SOCKETS)
    server.proc.send_signal(signum)
    # uvicorn re-raises SIGTERM after its graceful shutdown (make run counts that as clean); SIGINT exits 0.
    assert server.proc.wait(SHUTDOWN_BOUND_SECONDS) == clean_status, server.output()[-3000:]
    assert "Finished server process" in server.output()
