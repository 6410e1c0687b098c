"""`process <stream>` spans: one around each handler run (see eigenflux.base.tracing for the trace as a whole)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from eigenflux.base import tracing
from eigenflux.base.logs import log_context, loggable_id
from pipeline.runtime.errors import LeaseLost, NothingToDo
from pipeline.runtime.event import Event

# Semantic conventions have no generic delivery-count attribute; system-specific ones go under the system's name.
DELIVERY_COUNT = "messaging.redis.message.delivery_count"


def handling_span(event: Event, *, consumer: str, delivery_count: int) -> AbstractContextManager[trace.Span | None]:
    """`process <stream>` around one handler run, continued from the entry's `traceparent`. On a redelivery
    (delivery count > 1) the span also links to that context: the one every earlier attempt continued."""
    tracer = tracing.tracer()
    if tracer is None:
        return nullcontext()
    return _handling_span(tracer, event, consumer, delivery_count)


@contextmanager
def _handling_span(tracer: trace.Tracer, event: Event, consumer: str, delivery_count: int) -> Iterator[trace.Span]:
    parent = tracing.context_from_traceparent(event.traceparent)
    links = []
    if delivery_count > 1:
        origin = trace.get_current_span(parent).get_span_context()
        if origin.is_valid:
            links.append(Link(origin, {DELIVERY_COUNT: delivery_count}))
    span = tracer.start_span(
        f"process {event.stream}",
        context=parent,
        kind=SpanKind.CONSUMER,
        links=links,
        attributes={
            **tracing.messaging_attributes(event.stream, "process", "process"),
            "messaging.consumer.group.name": event.group,
            "messaging.client.id": consumer,
            "messaging.message.id": event.message_id,
            DELIVERY_COUNT: delivery_count,
            "cloudevents.event_id": loggable_id(event.id) or "",
            "cloudevents.event_type": loggable_id(event.type) or "",
        },
    )
    token = otel_context.attach(trace.set_span_in_context(span, parent))
    try:
        with log_context(span_id=format(span.get_span_context().span_id, "016x")):
            yield span
    except NothingToDo:
        span.set_attribute("eigenflux.outcome", "nothing_to_do")
        raise
    except LeaseLost:
        span.set_attribute("eigenflux.outcome", "lease_lost")
        raise
    except BaseException as exc:
        # The type only: an exception's message may quote data (a constraint's key, a model's reply).
        span.set_attribute("error.type", type(exc).__name__)
        span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
        raise
    finally:
        otel_context.detach(token)
        span.end()
