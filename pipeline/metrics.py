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

log = logging.getLogger(__name__)

MESSAGES = Counter(
    "eigenflux_pipeline_messages_total",
    "Stream entries handled, by outcome (acked, nothing_to_do, retried, dead_lettered, lease_lost, released, paused).",
    ["stream", "group", "outcome"],
)
HANDLE_SECONDS = Histogram(
    "eigenflux_pipeline_handle_seconds",
    "Time spent in a consumer's handle().",
    ["stream", "group"],
    buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
)
RETRIES = Counter("eigenflux_pipeline_retries_total", "Deliveries scheduled for retry.", ["stream", "group"])
DEAD_LETTERS = Counter(
    "eigenflux_pipeline_dead_letters_total", "Entries dead-lettered.", ["stream", "group", "error_class"]
)
RECLAIMED = Counter(
    "eigenflux_pipeline_reclaimed_total", "Entries taken over from idle consumers (XAUTOCLAIM).", ["stream", "group"]
)
LEASE_LOSSES = Counter(
    "eigenflux_pipeline_lease_losses_total", "Entries whose ownership was lost while handled.", ["stream", "group"]
)
LOOP_ERRORS = Counter(
    "eigenflux_pipeline_loop_errors_total",
    "Exceptions caught in a runtime loop (reader, acker, keeper, worker); the loop carried on.",
    ["stream", "group", "loop"],
)
BREAKER_STATE = Gauge(
    "eigenflux_pipeline_breaker_state",
    "Circuit breaker per consumer and dependency: 0 closed, 1 half-open, 2 open (no entry starts).",
    ["stream", "group", "dependency"],
)
BREAKER_OPENED = Counter(
    "eigenflux_pipeline_breaker_opened_total",
    "Times a consumer's circuit breaker opened (a dependency outage paused the consumer).",
    ["stream", "group", "dependency"],
)
BREAKER_OPEN_SECONDS = Gauge(
    "eigenflux_pipeline_breaker_open_seconds",
    "How long a consumer's circuit breaker has not been closed (open or half-open), in seconds; 0 while closed.",
    ["stream", "group", "dependency"],
)
BREAKER_OPEN_LIMIT = Gauge(
    "eigenflux_pipeline_breaker_open_limit_seconds",
    "PIPELINE_BREAKER_STUCK_SECONDS: a breaker open this long is a problem (the EigenfluxBreakerStuckOpen alert).",
    ["stream", "group", "dependency"],
)
PENDING = Gauge("eigenflux_stream_pending", "Entries delivered but not acknowledged.", ["stream", "group"])
LAG = Gauge("eigenflux_stream_lag", "Entries not yet delivered to the group.", ["stream", "group"])
LENGTH = Gauge("eigenflux_stream_length", "Entries in the stream.", ["stream"])
CONSUMERS = Gauge("eigenflux_stream_consumers", "Consumers known to the group.", ["stream", "group"])
RUNNING_CONSUMERS = Gauge(
    "eigenflux_pipeline_running_consumers",
    "Consumers of the group this process runs (0 once stopped). Summed over the scraped processes, it says whether "
    "anything reads the group at all: a dead process's series vanish with its scrape target.",
    ["stream", "group"],
)
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
    address = server.server_address[:2]
    log.info("metrics on %s:%s/metrics (and /healthz, /readyz)", *address)
    return address


class ThreadingWSGIServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format, *args):  # scrapes every few seconds would flood the log
        return
