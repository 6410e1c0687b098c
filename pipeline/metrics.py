"""Prometheus metrics of the pipeline (docs/operations.md#metrics), on the default registry (served by /metrics and
--metrics-port)."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import Counter, Gauge, Histogram, make_wsgi_app

# The stream engine's own instruments (handling, retries, dead letters, breakers, running consumers) are defined
# with the engine and are part of the pipeline's metrics: re-exported here for the health page and the tests.
from pipeline.runtime.instruments import (
    BREAKER_OPEN_LIMIT,
    BREAKER_OPEN_SECONDS,
    BREAKER_OPENED,
    BREAKER_STATE,
    DEAD_LETTERS,
    HANDLE_SECONDS,
    LEASE_LOSSES,
    LOOP_ERRORS,
    MESSAGES,
    RECLAIMED,
    RETRIES,
    RUNNING_CONSUMERS,
)

__all__ = [
    "BREAKER_OPENED",
    "BREAKER_OPEN_LIMIT",
    "BREAKER_OPEN_SECONDS",
    "BREAKER_STATE",
    "DEAD_LETTERS",
    "HANDLE_SECONDS",
    "LEASE_LOSSES",
    "LOOP_ERRORS",
    "MESSAGES",
    "RECLAIMED",
    "RETRIES",
    "RUNNING_CONSUMERS",
]

log = logging.getLogger(__name__)

PENDING = Gauge("eigenflux_stream_pending", "Entries delivered but not acknowledged.", ["stream", "group"])
LAG = Gauge("eigenflux_stream_lag", "Entries not yet delivered to the group.", ["stream", "group"])
LENGTH = Gauge("eigenflux_stream_length", "Entries in the stream.", ["stream"])
CONSUMERS = Gauge("eigenflux_stream_consumers", "Consumers known to the group.", ["stream", "group"])
OUTBOX_BACKLOG = Gauge("eigenflux_outbox_backlog", "Undispatched outbox events.")
OUTBOX_OLDEST_AGE = Gauge("eigenflux_outbox_oldest_age_seconds", "Age of the oldest undispatched outbox event.")
RELAY_DISPATCHED = Counter("eigenflux_relay_dispatched_total", "Outbox events added to their stream.", ["stream"])
RELAY_ERRORS = Counter("eigenflux_relay_errors_total", "Outbox events that failed to dispatch (retried).")
RELAY_DELAY = Histogram(
    "eigenflux_relay_delay_seconds",
    "Outbox event creation to XADD.",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 30),
)
SWEEPER_REPUBLISHED = Counter("eigenflux_sweeper_republished_total", "Stuck items re-published with replay set.")
TRIMMED = Counter("eigenflux_stream_trimmed_total", "Entries removed by MINID trimming.", ["stream"])
E2E_SECONDS = Histogram(
    "eigenflux_item_publish_to_terminal_seconds",
    "Publish to terminal status of an item (observed by the consumer that decides it).",
    ["status"],
    buckets=(0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800),
)


def serve(
    port: int, host: str = "127.0.0.1", probe: Callable[[], tuple[bool, dict]] | None = None
) -> tuple[str, int] | None:
    """Expose the default registry on host:port (port 0 = off), plus `/healthz` (the process answers) and
    `/readyz` (`probe()`: 200 when ready, else 503 with what is wrong). Returns the bound address, or None. A
    busy port is logged, not fatal. The default host is loopback: only this machine can scrape it."""
    if not port:
        return None
    metrics_app = make_wsgi_app()

    def app(environ, start_response):
        path = environ.get("PATH_INFO", "")
        if path in ("/healthz", "/readyz"):
            ready, body = (True, {"status": "ok"}) if path == "/healthz" or probe is None else probe()
            payload = json.dumps(body).encode()
            status = "200 OK" if ready else "503 Service Unavailable"
            start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(payload)))])
            return [payload]
        return metrics_app(environ, start_response)

    try:
        server = make_server(host, port, app, ThreadingWSGIServer, handler_class=_QuietHandler)
    except OSError as exc:
        log.warning("metrics port %s:%s unavailable (%s); metrics not exposed by this process", host, port, exc)
        return None
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    host_bound, port_bound = server.server_address[:2]
    address = (str(host_bound), int(port_bound))  # an AF_INET server: the host is already a str
    log.info("metrics on %s:%s/metrics (and /healthz, /readyz)", *address)
    return address


class ThreadingWSGIServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format, *args):  # scrapes every few seconds would flood the log
        return
