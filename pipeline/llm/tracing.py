"""`chat <model>` / `embeddings <model>` spans: one per model call attempt, with the prompt's name, the model, its
tokens, latency and outcome (see eigenflux.base.tracing for the trace as a whole)."""

from __future__ import annotations

import time

from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from eigenflux.base import tracing

PROMPT_NAME = "eigenflux.prompt.name"


class ModelCallSpan:
    """One model call attempt: started before the request, ended with its outcome (see pipeline.llm.calls)."""

    __slots__ = ("_span", "_started")

    def __init__(self, tracer: trace.Tracer, *, prompt: str, model: str, attempt: int):
        self._started = time.monotonic()
        operation = "embeddings" if prompt == "embedding" else "chat"
        self._span = tracer.start_span(
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
    tracer = tracing.tracer()
    if tracer is None:
        return _NO_MODEL_CALL_SPAN
    return ModelCallSpan(tracer, prompt=prompt, model=model, attempt=attempt)
