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
attributed after the OpenTelemetry semantic conventions, each in the package that owns the work (this module
gives them `tracer()` and the shared attributes):

- `create <stream>` around an outbox insert (items.outbox); its context is the event's `traceparent`;
- `publish <stream>` per event the relay XADDs (pipeline.relay), a child of that context; the stream entry
  carries the publish span's context, so each consumer's span hangs below it;
- `process <stream>` around each handler run (pipeline.runtime.tracing), continued from the entry's
  `traceparent`; a redelivery also links to that context and carries its delivery count;
- `chat <model>` / `embeddings <model>` per model call attempt (pipeline.llm.tracing): prompt name, model,
  tokens, latency, outcome.

Spans carry ids, names, counts and outcomes only: never an item's content, a prompt, a model's output, a
token or an exception message (errors are recorded by their type name).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Mapping
from typing import TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

log = logging.getLogger(__name__)
T = TypeVar("T")

SERVICE_PREFIX = "eigenflux-"
MESSAGING_SYSTEM = "redis"  # Redis Streams; messaging.system has no value of its own for it

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


# --- helpers for the spans each layer starts (items.outbox, pipeline.relay, pipeline.runtime, pipeline.llm) ----


def tracer() -> trace.Tracer | None:
    """The project's tracer while tracing is on, else None: a span helper returns at once on None."""
    return _tracer() if _provider is not None else None


def messaging_attributes(stream: str, operation_type: str, operation_name: str) -> dict[str, str]:
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
