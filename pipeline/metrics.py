"""Prometheus metrics of the pipeline (SPEC §9), on the default registry (served by /metrics and --metrics-port)."""

from __future__ import annotations

import logging

from prometheus_client import Counter, Gauge, Histogram, start_http_server

log = logging.getLogger(__name__)

MESSAGES = Counter(
    "eigenflux_pipeline_messages_total",
    "Stream entries handled, by outcome (acked, nothing_to_do, retried, dead_lettered, lease_lost, released).",
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


def serve(port: int, host: str = "127.0.0.1") -> tuple[str, int] | None:
    """Expose the default registry on host:port (port 0 = off); returns the bound address, or None. A busy
    port is logged, not fatal. The default host is loopback: only this machine can scrape it."""
    if not port:
        return None
    try:
        server, _ = start_http_server(port, addr=host)
    except OSError as exc:
        log.warning("metrics port %s:%s unavailable (%s); metrics not exposed by this process", host, port, exc)
        return None
    address = server.server_address[:2]
    log.info("metrics on %s:%s/metrics", *address)
    return address
