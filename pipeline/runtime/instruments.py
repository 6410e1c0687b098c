"""The stream engine's Prometheus instruments (docs/operations.md#metrics), on the default registry: what each
consumer handled and how, retries, reclaims, lease losses, dead letters, loop errors, breakers, running
consumers. The process serving them (run_pipeline's --metrics-port) is the application's."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

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
NOT_HANDLED = Counter(
    "eigenflux_pipeline_events_not_handled_total",
    "Entries of a type their stream carries that the group does not handle: acknowledged, never dead-lettered.",
    ["stream", "group", "type"],
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
RUNNING_CONSUMERS = Gauge(
    "eigenflux_pipeline_running_consumers",
    "Consumers of the group this process runs (0 once stopped). Summed over the scraped processes, it says whether "
    "anything reads the group at all: a dead process's series vanish with its scrape target.",
    ["stream", "group"],
)
