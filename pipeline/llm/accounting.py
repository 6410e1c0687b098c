"""Usage accounting: one LLMCall row and one set of metric samples per call attempt (docs/model-layer.md#accounting).

Rows are written at once, except inside `deferred_rows()`: then this thread keeps them in memory and the
caller writes them inside the transaction they belong with (`write_deferred`, e.g. the enrichment checkpoint
that stores the call's result), saving a transaction per call. Whatever is still kept when the block ends is
written then, in a transaction of its own."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from django.db import DatabaseError, transaction
from django.utils import timezone

from eigenflux.base.sqlrows import Carried, Rows, insert_rows
from pipeline.llm import metrics
from pipeline.llm.errors import MODEL
from pipeline.runtime import dependencies

# How the local analyzer shows in LLMCall rows, metrics and ProcessedItem.analyzer; it is no remote dependency.
LOCAL_MODEL = "local"

logger = logging.getLogger(__name__)
_local = threading.local()  # .rows: the rows kept by the innermost deferred_rows() on this thread


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
    if model != LOCAL_MODEL and outcome != Outcome.CANCELLED:
        # The circuit breakers' signal: did the model endpoint answer (even with an unusable reply)?
        dependencies.report(MODEL, outcome != Outcome.UNAVAILABLE)
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
    row = {
        "prompt": prompt,
        "model": model[:100],
        "item_id": item_id,
        "latency_ms": round(latency_s * 1000.0, 3),
        "input_tokens": max(0, usage.input_tokens),
        "output_tokens": max(0, usage.output_tokens),
        "reasoning_tokens": max(0, usage.reasoning_tokens),
        "outcome": outcome,
        "error": error[:2000],
    }
    kept = getattr(_local, "rows", None)
    if kept is not None:
        kept.append(row)
        return
    _write([row])


def _write(rows: list[dict[str, Any]]) -> bool:
    """Insert the rows; a database error is logged, not raised (a savepoint inside a caller's transaction)."""
    from pipeline.models import LLMCall  # the app registry must be ready; tasks import this module early

    now = timezone.now()
    try:
        with transaction.atomic():
            insert_rows(LLMCall, [{**row, "created_at": now} for row in rows])
    except DatabaseError:
        first = rows[0]
        logger.exception(
            "could not record %d LLMCall row(s) prompt=%s model=%s item=%s",
            len(rows),
            first["prompt"],
            first["model"],
            first["item_id"],
        )
        return False
    return True


@contextmanager
def deferred_rows() -> Iterator[None]:
    """Keep this thread's LLMCall rows until write_deferred() (or the end of the block) writes them."""
    previous = getattr(_local, "rows", None)
    kept: list[dict[str, Any]] = []
    _local.rows = kept
    try:
        yield
    finally:
        _local.rows = previous
        if kept:
            _write(kept)


def carried_rows() -> Carried | None:
    """The rows kept so far, for a checkpoint to carry into its own statement
    (items.services.enrichment_state.item_checkpoint); they are forgotten once it commits."""
    from pipeline.models import LLMCall

    kept = getattr(_local, "rows", None)
    if not kept:
        return None
    batch = list(kept)
    now = timezone.now()

    def forget() -> None:
        _forget(kept, batch)

    return Carried(rows=Rows(LLMCall, [{**row, "created_at": now} for row in batch]), written=forget)


def _forget(kept: list[dict[str, Any]], batch: list[dict[str, Any]]) -> None:
    for row in batch:
        for i, other in enumerate(kept):
            if other is row:
                del kept[i]
                break


def write_deferred() -> None:
    """Write the rows kept so far; inside a transaction they are forgotten only once it commits (a rollback
    leaves them kept, to be written with a later transaction or at the end of the block)."""
    kept = getattr(_local, "rows", None)
    if not kept:
        return
    batch = list(kept)
    if _write(batch):
        transaction.on_commit(lambda: _forget(kept, batch))
