"""OpenTelemetry traces: one trace per item, from the publish request to the outcome and the consumers after it.

`setup(role)` runs once per process (web, pipeline, relay, worker). It installs the SDK only when spans have
somewhere to go: the OTLP/HTTP exporter when OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)
is set, the console exporter when OTEL_TRACES_EXPORTER=console. Otherwise nothing is installed: the API's
no-op tracer stays in place, the helpers below return at their first `if`, and a `traceparent` is still
made at publish and carried along, as before. The standard OTEL_* variables are honoured by the SDK itself
(OTEL_SDK_DISABLED, OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER[_ARG], OTEL_BSP_*,
OTEL_EXPORTER_OTLP_HEADERS...).

Django, psycopg and redis are traced by their instrumentation packages (SQL statements without their
parameters, Redis commands as `COMMAND ? ?`). The project adds the spans those cannot know about, named and
attributed after the OpenTelemetry semantic conventions:

- `create <stream>` around an outbox insert; its context is the event's `traceparent`;
- `publish <stream>` per event the relay XADDs, a child of that context; the stream entry carries the
  publish span's context, so each consumer's span hangs below it;
- `process <stream>` around each handler run, continued from the entry's `traceparent`; a redelivery also
  links to that context and carries its delivery count;
- `chat <model>` / `embeddings <model>` per model call attempt (prompt name, model, tokens, latency, outcome).

Spans carry ids, names, counts and outcomes only: never an item's content, a prompt, a model's output, a
token or an exception message (errors are recorded by their type name).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from typing import TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

log = logging.getLogger(__name__)
T = TypeVar("T")

SERVICE_PREFIX = "eigenflux-"
MESSAGING_SYSTEM = "redis"  # Redis Streams; messaging.system has no value of its own for it
# Semantic conventions have no generic delivery-count attribute; system-specific ones go under the system's name.
DELIVERY_COUNT = "messaging.redis.message.delivery_count"
PROMPT_NAME = "eigenflux.prompt.name"

_propagator = TraceContextTextMapPropagator()
_lock = threading.Lock()
_provider = None  # the SDK TracerProvider this process installed, or None (no-op)
_decided = False
_tracer_cache: trace.Tracer | None = None


def enabled() -> bool:
    """True once this process installed the SDK (spans are recorded and exported)."""
    return _provider is not None


def exporter_from_environment(environ: Mapping[str, str] | None = None):
    """The span exporter the environment asks for, or None for "export nothing" (then nothing is installed).

    OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none: None. OTEL_TRACES_EXPORTER=console: spans printed
    to stdout. Otherwise (otlp, the default) the OTLP/HTTP exporter, only when an endpoint is set."""
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    kinds = [kind.strip().lower() for kind in env.get("OTEL_TRACES_EXPORTER", "otlp").split(",") if kind.strip()]
    if not kinds or "none" in kinds:
        return None
    if kinds == ["console"]:
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    if kinds != ["otlp"]:
        raise ValueError(f"OTEL_TRACES_EXPORTER must be otlp, console or none, not {env['OTEL_TRACES_EXPORTER']!r}")
    if not (env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT")):
        return None
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter()  # reads the endpoint, headers, timeout and compression from OTEL_EXPORTER_OTLP_*


def setup(role: str, *, span_exporter=None, batch: bool = True) -> bool:
    """Install tracing for this process once (later calls return the first decision); True if installed.

    `role` names the process (service.name `eigenflux-<role>` unless OTEL_SERVICE_NAME is set).
    `span_exporter` overrides the environment's choice (tests pass an in-memory exporter, `batch=False`)."""
    global _provider, _decided
    with _lock:
        if _provider is not None or (_decided and span_exporter is None):
            return _provider is not None
        _decided = True
        exporter = span_exporter if span_exporter is not None else exporter_from_environment()
        if exporter is None:
            return False
        from opentelemetry.instrumentation.django import DjangoInstrumentor
        from opentelemetry.instrumentation.psycopg import PsycopgInstrumentor
        from opentelemetry.instrumentation.redis import RedisInstrumentor
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

        attributes = {"service.namespace": "eigenflux"}
        if not os.environ.get("OTEL_SERVICE_NAME"):
            attributes["service.name"] = SERVICE_PREFIX + role
        provider = TracerProvider(resource=Resource.create(attributes))  # sampler from OTEL_TRACES_SAMPLER
        provider.add_span_processor(BatchSpanProcessor(exporter) if batch else SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        DjangoInstrumentor().instrument(tracer_provider=provider)
        # Statement text only: parameters (item content, tokens' hashes...) never become attributes, and no
        # sqlcommenter rewrites the SQL.
        PsycopgInstrumentor().instrument(tracer_provider=provider, capture_parameters=False, enable_commenter=False)
        RedisInstrumentor().instrument(tracer_provider=provider)  # commands sanitized to `XADD ? ? ...`
        _provider = provider
    log.info("tracing on: service %s", provider.resource.attributes.get("service.name"))
    return True


def uninstall() -> None:
    """Undo setup()'s instrumentation (tests that traced a few requests in-process). The API's global provider
    cannot be replaced: it stays, but nothing here or in the instrumentations starts spans on it any more."""
    global _provider, _decided, _tracer_cache
    with _lock:
        if _provider is None:
            return
        from opentelemetry.instrumentation.django import DjangoInstrumentor
        from opentelemetry.instrumentation.psycopg import PsycopgInstrumentor
        from opentelemetry.instrumentation.redis import RedisInstrumentor

        for instrumentor in (DjangoInstrumentor(), PsycopgInstrumentor(), RedisInstrumentor()):
            instrumentor.uninstrument()
        _provider.force_flush()
        _provider, _decided, _tracer_cache = None, False, None


def flush(timeout_millis: int = 5000) -> None:
    """Export what is buffered (before a process exits on its own)."""
    if _provider is not None:
        _provider.force_flush(timeout_millis)


def _tracer() -> trace.Tracer:
    global _tracer_cache
    if _tracer_cache is None:  # made once: get_tracer builds a new Tracer on every call
        _tracer_cache = trace.get_tracer("eigenflux")
    return _tracer_cache


# --- trace context ------------------------------------------------------------------------------------------


def context_from_traceparent(traceparent: str | None) -> otel_context.Context:
    """The context a W3C `traceparent` value continues (an empty one when it is missing or malformed)."""
    return _propagator.extract({"traceparent": traceparent} if traceparent else {})


def traceparent_of(span: trace.Span) -> str | None:
    """The `traceparent` value naming `span`, or None when it has no valid context."""
    carrier: dict[str, str] = {}
    _propagator.inject(carrier, context=trace.set_span_in_context(span))
    return carrier.get("traceparent")


def carry_context(fn: Callable[[], T]) -> Callable[[], T]:
    """`fn`, to run on another thread (a pool's) inside the trace context current here, so that its spans join
    this trace. Only the trace context travels: copying the whole contextvars context would also carry
    Django's per-context connection storage to the other thread."""
    captured = otel_context.get_current()

    def run() -> T:
        token = otel_context.attach(captured)
        try:
            return fn()
        finally:
            otel_context.detach(token)

    return run


def current_traceparent(default: str | None = None) -> str | None:
    """The `traceparent` of the span current here (the handler's, in a consumer), else `default`."""
    if _provider is None:
        return default
    return traceparent_of(trace.get_current_span()) or default


# --- spans ----------------------------------------------------------------------------------------------------


@contextmanager
def outbox_write_span(*, stream: str, event_type: str, traceparent: str | None) -> Iterator[trace.Span | None]:
    """`create <stream>` around an outbox insert: a child of `traceparent` when one is given (a replay, an outcome
    event), else of the current span (the publish request). Yields None when tracing is off."""
    if _provider is None:
        yield None
        return
    parent = context_from_traceparent(traceparent) if traceparent else None
    if parent is not None and not trace.get_current_span(parent).get_span_context().is_valid:
        parent = None  # a malformed value: the current span's trace rather than a new one
    with _tracer().start_as_current_span(
        f"create {stream}",
        context=parent,
        kind=SpanKind.PRODUCER,
        attributes={
            **_messaging(stream, "create", "create"),
            "cloudevents.event_type": event_type,
        },
        record_exception=False,
    ) as span:
        yield span


def _messaging(stream: str, operation_type: str, operation_name: str) -> dict[str, str]:
    """The messaging attributes every stream span carries (system, operation, destination)."""
    return {
        "messaging.system": MESSAGING_SYSTEM,
        "messaging.operation.type": operation_type,
        "messaging.operation.name": operation_name,
        "messaging.destination.name": stream,
    }


def set_message_id(span: trace.Span | None, event_id: str) -> None:
    if span is not None:
        span.set_attribute("messaging.message.id", event_id)
        span.set_attribute("cloudevents.event_id", event_id)


def relay_spans(rows: list[tuple[str, dict[str, str]]]) -> list[trace.Span] | None:
    """One started `publish <stream>` span per (stream, envelope) about to be XADDed, each a child of the
    envelope's `traceparent`; the envelope's `traceparent` is replaced by the span's own (the copy written to
    the stream). None when tracing is off. End them with `end_relay_spans`."""
    if _provider is None:
        return None
    tracer = _tracer()
    spans = []
    for stream, envelope in rows:
        span = tracer.start_span(
            f"publish {stream}",
            context=context_from_traceparent(envelope.get("traceparent")),
            kind=SpanKind.PRODUCER,
            attributes={
                **_messaging(stream, "send", "publish"),
                "cloudevents.event_id": envelope.get("id", ""),
                "cloudevents.event_type": envelope.get("type", ""),
            },
        )
        envelope["traceparent"] = traceparent_of(span) or envelope.get("traceparent", "")
        spans.append(span)
    return spans


def end_relay_spans(spans: list[trace.Span] | None, results: list) -> None:
    """End the relay's spans with each XADD's result: the stream entry id, or the error's type."""
    if spans is None:
        return
    for span, result in zip(spans, results, strict=True):
        if isinstance(result, Exception):
            span.set_attribute("error.type", type(result).__name__)
            span.set_status(Status(StatusCode.ERROR, type(result).__name__))
        else:
            span.set_attribute("messaging.message.id", result.decode() if isinstance(result, bytes) else str(result))
        span.end()


def handling_span(event, *, consumer: str, delivery_count: int):
    """`process <stream>` around one handler run, continued from the entry's `traceparent`. On a redelivery
    (delivery count > 1) the span also links to that context: the one every earlier attempt continued."""
    if _provider is None:
        return nullcontext()
    return _handling_span(event, consumer, delivery_count)


@contextmanager
def _handling_span(event, consumer: str, delivery_count: int) -> Iterator[trace.Span]:
    from eigenflux.logs import log_context, loggable_id
    from pipeline.runtime.errors import LeaseLost, NothingToDo

    parent = context_from_traceparent(event.traceparent)
    links = []
    if delivery_count > 1:
        origin = trace.get_current_span(parent).get_span_context()
        if origin.is_valid:
            links.append(Link(origin, {DELIVERY_COUNT: delivery_count}))
    span = _tracer().start_span(
        f"process {event.stream}",
        context=parent,
        kind=SpanKind.CONSUMER,
        links=links,
        attributes={
            **_messaging(event.stream, "process", "process"),
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


class ModelCallSpan:
    """One model call attempt: started before the request, ended with its outcome (see pipeline.llm.calls)."""

    __slots__ = ("_span", "_started")

    def __init__(self, *, prompt: str, model: str, attempt: int):
        self._started = time.monotonic()
        operation = "embeddings" if prompt == "embedding" else "chat"
        self._span = _tracer().start_span(
            f"{operation} {model}",
            kind=SpanKind.CLIENT,
            attributes={
                "gen_ai.operation.name": operation,
                "gen_ai.provider.name": "openai",
                "gen_ai.request.model": model,
                PROMPT_NAME: prompt,
                "eigenflux.model_call.attempt": attempt,
            },
        )

    def end(self, outcome: str, *, input_tokens: int | None = None, output_tokens: int | None = None) -> None:
        span = self._span
        span.set_attribute("eigenflux.model_call.outcome", str(outcome))
        span.set_attribute("eigenflux.model_call.latency_ms", round((time.monotonic() - self._started) * 1000, 1))
        if input_tokens is not None:
            span.set_attribute("gen_ai.usage.input_tokens", input_tokens)
        if output_tokens is not None:
            span.set_attribute("gen_ai.usage.output_tokens", output_tokens)
        if str(outcome) != "ok":
            span.set_attribute("error.type", str(outcome))
            span.set_status(Status(StatusCode.ERROR, str(outcome)))
        span.end()


class _NoModelCallSpan:
    __slots__ = ()

    def end(self, outcome: str, *, input_tokens: int | None = None, output_tokens: int | None = None) -> None:
        return None


_NO_MODEL_CALL_SPAN = _NoModelCallSpan()


def model_call_span(*, prompt: str, model: str, attempt: int) -> ModelCallSpan | _NoModelCallSpan:
    if _provider is None:
        return _NO_MODEL_CALL_SPAN
    return ModelCallSpan(prompt=prompt, model=model, attempt=attempt)
