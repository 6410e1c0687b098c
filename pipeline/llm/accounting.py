"""Usage accounting: one LLMCall row and one set of metric samples per call attempt (docs/model-layer.md#accounting)."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.db import DatabaseError, transaction

from pipeline.llm import metrics
from pipeline.runtime import dependencies

LOCAL_ANALYZER = "local"  # pipeline.llm.tasks.LOCAL_MODEL: the offline analyzer is no remote dependency

logger = logging.getLogger(__name__)


class Outcome:
    OK = "ok"
    INVALID_OUTPUT = "invalid_output"
    UNAVAILABLE = "unavailable"  # one transient failure (429/5xx/timeout/connection); the call may retry
    REJECTED = "rejected"  # a non-retryable 4xx
    CANCELLED = "cancelled"


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0


def record_call(
    *,
    prompt: str,
    model: str,
    item_id: int | None,
    latency_s: float,
    outcome: str,
    usage: Usage | None = None,
    error: str = "",
) -> None:
    """Record one attempt. Accounting must never break enrichment, so a database error is logged, not raised."""
    from pipeline.models import LLMCall  # the app registry must be ready; tasks import this module early

    if model != LOCAL_ANALYZER and outcome != Outcome.CANCELLED:
        # The circuit breakers' signal: did the model endpoint answer (even with an unusable reply)?
        dependencies.report(dependencies.MODEL, outcome != Outcome.UNAVAILABLE)
    usage = usage or Usage()
    metrics.CALLS.labels(prompt, model, outcome).inc()
    metrics.LATENCY.labels(prompt, model).observe(latency_s)
    for kind, count in (
        ("input", usage.input_tokens),
        ("output", usage.output_tokens),
        ("reasoning", usage.reasoning_tokens),
    ):
        if count:
            metrics.TOKENS.labels(prompt, model, kind).inc(count)
    try:
        with transaction.atomic():  # a savepoint when the caller is in a transaction: a failure stays local
            LLMCall.objects.create(
                prompt=prompt,
                model=model[:100],
                item_id=item_id,
                latency_ms=round(latency_s * 1000.0, 3),
                input_tokens=max(0, usage.input_tokens),
                output_tokens=max(0, usage.output_tokens),
                reasoning_tokens=max(0, usage.reasoning_tokens),
                outcome=outcome,
                error=error[:2000],
            )
    except DatabaseError:
        logger.exception("could not record LLMCall prompt=%s model=%s item=%s", prompt, model, item_id)
