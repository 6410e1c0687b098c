"""`make run` prints its banner once the stack can take work (eigenflux.devready.Startup): the web answers /readyz
and the pipeline's /readyz lists no consumer still warming up; past its bound it says what was not ready. Asked of
real HTTP servers on this machine."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from eigenflux.devready import Startup, local_url


class _Readyz(ThreadingHTTPServer):
    """GET /readyz answers `body` (a 503 when its status is not ok or degraded)."""

    def __init__(self, body: dict) -> None:
        self.body = body
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                payload = json.dumps(server.body).encode()
                self.send_response(200 if server.body.get("status") in ("ok", "degraded") else 503)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def port(self) -> int:
        return self.server_address[1]


@pytest.fixture
def servers():
    web, pipeline = _Readyz({"status": "ok"}), _Readyz({"status": "ok", "warming_up": ["item-publish"]})
    yield web, pipeline
    for server in (web, pipeline):
        server.shutdown()
        server.server_close()


def test_the_stack_is_ready_once_no_consumer_warms_up(servers):
    web, pipeline = servers
    startup = Startup(web=local_url("0.0.0.0", web.port), pipeline_port=pipeline.port)  # noqa: S104 - a bind address
    assert not startup.done() and startup.web_ready and startup.warming == ["item-publish"]
    pipeline.body = {"status": "ok", "warming_up": []}
    startup._next = 0.0  # the next poll now, not half a second later
    assert startup.done()
    assert startup.summary().startswith("pipeline ready: web and pipeline took work ")


def test_past_its_bound_the_start_says_what_was_not_ready(servers):
    web, pipeline = servers
    web.body = {"status": "unavailable"}
    startup = Startup(web=local_url("127.0.0.1", web.port), pipeline_port=pipeline.port, timeout=0.0)
    assert startup.done() and startup.timed_out
    summary = startup.summary()
    assert (
        summary.startswith("WARNING: web and pipeline not ready after ")
        and "(still warming up: item-publish)" in summary
    )


def test_without_a_pipeline_metrics_port_only_the_web_is_asked(servers):
    web, _ = servers
    assert Startup(web=local_url("127.0.0.1", web.port), pipeline_port=0).done()
