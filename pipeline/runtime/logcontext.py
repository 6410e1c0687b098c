"""The log context of one delivery: every line a handler (or the runtime around it) writes names the event,
its stream, group and consumer, the delivery count, the trace and the item or agent the event is about."""

from __future__ import annotations

from functools import partial

from eigenflux.base.logs import LogContext, lazy_log_context, loggable_id, trace_id_from_traceparent
from pipeline.runtime.event import Event

# Ids an event's data may carry (events carry ids and references, never content).
_DATA_IDS = ("item_id", "agent_id")


def delivery_log_context(event: Event, *, consumer: str, delivery_count: int) -> LogContext:
    # Lazy: most deliveries log nothing, and binding must cost next to nothing per stream entry.
    return lazy_log_context(partial(delivery_log_fields, event, consumer, delivery_count))


def delivery_log_fields(event: Event, consumer: str, delivery_count: int) -> dict[str, object]:
    """The fields, from an untrusted entry: ids are logged only when they look like ids."""
    fields: dict[str, object] = {
        "trace_id": trace_id_from_traceparent(event.traceparent),
        "event_id": loggable_id(event.id),
        "correlation_id": loggable_id(event.correlation_id),
        "stream": event.stream,
        "group": event.group,
        "consumer": consumer,
        "message_id": event.message_id,
        "delivery_count": delivery_count,
    }
    for name in _DATA_IDS:
        if event.data.get(name) is not None:
            fields[name] = loggable_id(event.data[name])
    return fields
