"""State transitions the enrichment pipeline makes on an item (docs/enrichment.md), each a conditional update.

Every write after the claim is guarded by `status=processing` and the claim token (the stream entry
holding the claim), so a deleted item is never overwritten and a consumer that lost its claim
commits nothing. Terminal writes add the ModerationDecisions and the outcome event in one transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from eigenflux.base.sqlrows import Carried, Rows, insert_rows, update_carrying, update_where
from items.events import ITEM_COMPLETED, ITEM_DISCARDED, ITEM_FAILED, ITEM_HELD, STREAM_ITEM_EVENTS
from items.expiry import expiry_capped
from items.feed import feed_invalidate_on_commit
from items.feed_ranking.concepts import item_concepts
from items.models import DecisionStage, ItemStatus, ModerationDecision, ProcessedItem, PublicReason, RawItem
from items.outbox import outbox_event_create, outbox_event_rows, outbox_event_written
from items.selectors import exact_duplicate_of
from items.services.item_claim import CHECKPOINTS as CHECKPOINTS  # re-exported: callers import them from here
from items.services.item_claim import Claim as Claim
from items.services.item_claim import claim_token as claim_token
from items.services.item_claim import item_claim as item_claim
from items.services.item_states import embedding_indexed, outcome, unclaimed
from items.textsearch import search_vector_params, search_vector_sql

CHECKPOINT_FIELDS = frozenset(
    {
        "pending_embedding",
        "embedding_model",
        "safety_passed_at",
        "safety_risk",
        "extraction",
        "analyzer",
        "suggestion",
        "suggested_at",
    }
)


@dataclass(frozen=True)
class Decision:
    """One step's verdict, stamped when the step ran: a decision can be written later than it was made (with the
    next checkpoint or the outcome), and the history lists decisions by this time."""

    stage: str
    verdict: str
    category: str = ""
    reason: str = ""
    model: str = ""
    at: datetime = field(default_factory=timezone.now)


@dataclass(frozen=True)
class Cause:
    """The event being handled, so outcome events chain to it."""

    event_id: str
    correlation_id: str
    traceparent: str | None
    replay: bool = False


def _held_by(item: ProcessedItem, token: str) -> dict[str, Any]:
    """The item while this claim holds it (processing, claimed by `token`): every write after the claim is
    conditional on it."""
    return {ProcessedItem._meta.pk.name: item.pk, "status": ItemStatus.PROCESSING, "claimed_by": token}


def _mine(item: ProcessedItem, token: str, values: dict[str, Any]) -> int:
    """Update the item while this claim holds it; the rows changed (0 or 1)."""
    return update_where(ProcessedItem, values, where=_held_by(item, token))


def item_checkpoint(
    *,
    item: ProcessedItem,
    token: str,
    decisions: Sequence[Decision] = (),
    lease_seconds: float | None = None,
    carry: Callable[[], Carried | None] | None = None,
    **fields: object,
) -> bool:
    """Store an intermediate result (pending embedding, safety pass, extraction, suggestion) so a retry reuses it, with
    the decisions made since the last write (in the order they were made).

    `lease_seconds` extends the claim in the same update (a model call just finished: no separate write);
    `carry` hands over the caller's rows that belong with this checkpoint (written whether or not the item is
    still ours) and what to do once they are committed. It all goes in one statement (one transaction, one
    round trip: this runs four times per enriched item)."""
    if not set(fields) <= CHECKPOINT_FIELDS:
        raise ValueError(f"not a checkpoint field: {sorted(set(fields) - CHECKPOINT_FIELDS)}")
    now = timezone.now()
    if lease_seconds is not None:
        fields_to_write = {**fields, "lease_expires_at": now + timedelta(seconds=lease_seconds)}
    else:
        fields_to_write = fields
    carried = carry() if carry is not None else None
    inserts = [Rows(ModerationDecision, _decision_rows(item, decisions), ignore_conflicts=True, if_updated=True)]
    if carried is not None:
        inserts.append(carried.rows)
    values = {**fields_to_write, "updated_at": now}
    ok = bool(update_carrying(ProcessedItem, values, where=_held_by(item, token), inserts=inserts))
    if carried is not None:
        transaction.on_commit(carried.written)  # at once, unless a caller's transaction holds this one
    if ok:
        for name, value in fields.items():
            setattr(item, name, value)
    return ok


def item_release(
    *,
    item: ProcessedItem,
    token: str,
    error: str,
    decision: Decision | None = None,
    also: Callable[[], None] | None = None,
) -> bool:
    """Give the claim back after a transient failure; the entry will be retried. `also` runs in the same
    transaction."""
    with transaction.atomic():
        if also is not None:
            also()
        values = {**unclaimed(), "status": ItemStatus.PENDING, "last_error": error[:2000], "updated_at": timezone.now()}
        ok = bool(_mine(item, token, values))
        if ok and decision:
            _record(item, [decision])
    return ok


def item_discard(
    *,
    item: ProcessedItem,
    token: str,
    decisions: list[Decision],
    reason: str = PublicReason.CONTENT_EVALUATION,
    duplicate_of: RawItem | None = None,
    cause: Cause,
    carry: Callable[[], Carried | None] | None = None,
    **fields: object,
) -> bool:
    return _finish(
        item=item,
        token=token,
        status=ItemStatus.DISCARDED,
        event_type=ITEM_DISCARDED,
        decisions=decisions,
        cause=cause,
        reason=reason,
        duplicate_of=duplicate_of,
        carry=carry,
        **fields,
    )


def item_give_up(*, item_id: int, message_id: str, error_class: str, error: str, cause: Cause) -> bool:
    """The stream runtime gave up on the item's stream entry (its retries or deliveries are exhausted): mark
    the item `failed` with the reason and announce `item.failed`, in one transaction.

    Only an item this entry could still be working on changes: `pending`, or `processing` under a claim of
    this entry or a claim that has lapsed. A terminal item, or one claimed by another live entry, is left
    alone. The conditional update makes it happen exactly once however often the runtime calls this.
    Checkpoints (embedding, safety pass, extraction, suggestion) are kept, so a requeue pays for nothing twice.
    """
    now = timezone.now()
    item = ProcessedItem.objects.filter(pk=item_id).only("pk", "author_id", "status", "run").first()
    if item is None:
        return False
    ours = (
        Q(status=ItemStatus.PENDING)
        | Q(status=ItemStatus.PROCESSING, claimed_by__startswith=f"{message_id}@")
        | Q(status=ItemStatus.PROCESSING, lease_expires_at__lt=now)
        | Q(status=ItemStatus.PROCESSING, lease_expires_at__isnull=True)
    )
    with transaction.atomic():
        updated = ProcessedItem.objects.filter(ours, pk=item_id).update(
            **unclaimed(), status=ItemStatus.FAILED, last_error=error[:2000], processed_at=now, updated_at=now
        )
        if not updated:
            return False
        _record(item, [Decision(DecisionStage.DELIVERY, "failed", error_class, error[:1000])])
        outbox_event_create(
            stream=STREAM_ITEM_EVENTS,
            event_type=ITEM_FAILED,
            subject=str(item_id),
            data={"item_id": str(item_id), "author_id": str(item.author_id), "status": ItemStatus.FAILED, "reason": ""},
            correlation_id=cause.correlation_id,
            causation_id=cause.event_id,
            traceparent=cause.traceparent,
            replay=cause.replay,
        )
    return True


def item_complete(
    *,
    item: ProcessedItem,
    token: str,
    decisions: list[Decision],
    cause: Cause,
    fields: dict,
    check_duplicate: bool = True,
    hold: bool = False,
    carry: Callable[[], Carried | None] | None = None,
) -> bool:
    """Persist the enriched item as `completed` (the checkpoint), with its search vector; or, with `hold`, as
    `review` (a checkpoint too) with `item.held`: hidden from readers until a moderator decides, who writes
    the search vector on approval.

    Completions of the same content are serialised (an advisory lock on the content hash): two identical
    items enriched at the same time both pass the early exact-duplicate check, and the one that persists
    second is discarded here as the duplicate. A moderator's approval skips this (`check_duplicate`)."""
    with transaction.atomic():
        if check_duplicate:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [item.raw.content_hash])
            original = exact_duplicate_of(item)
            if original is not None:
                reason = f"item {original.pk} with the same content was enriched first"
                late = Decision(DecisionStage.DUPLICATE, "discard", "exact", reason)
                kept = {k: v for k, v in fields.items() if k not in ("group_id", "suggestion", "suggested_at")}
                return item_discard(
                    item=item,
                    token=token,
                    decisions=[*(d for d in decisions if d.stage != DecisionStage.REVIEW), late],
                    reason=PublicReason.DUPLICATE,
                    duplicate_of=original,
                    cause=cause,
                    carry=carry,
                    **kept,
                )
        if hold:
            status, event_type, search = ItemStatus.REVIEW, ITEM_HELD, None
        else:
            status, event_type = ItemStatus.COMPLETED, ITEM_COMPLETED
            search = (
                search_vector_sql(),
                search_vector_params(
                    summary=fields.get("summary", ""), keywords=fields.get("keywords", []), content=item.raw.content
                ),
            )
            fields = {**fields, "concepts": item_concepts(item.raw.content, fields.get("keywords", []))}
        return _finish(
            item=item,
            token=token,
            status=status,
            event_type=event_type,
            decisions=decisions,
            cause=cause,
            search_vector=search,
            carry=carry,
            **fields,
        )


def _finish(
    *,
    item: ProcessedItem,
    token: str,
    status: str,
    event_type: str,
    decisions: list[Decision],
    cause: Cause,
    carry: Callable[[], Carried | None] | None = None,
    **fields: object,
) -> bool:
    """The outcome: the item's row, its decisions, its outcome event and the caller's carried rows in one statement
    (the carried rows are written even when the item is no longer ours; the rest only when it still is)."""
    now = timezone.now()
    # No savepoint when item_complete() holds the transaction: nothing here is caught and retried inside it.
    with transaction.atomic(savepoint=False):
        values: dict[str, Any] = {**outcome(status=status, now=now), **fields}
        expressions: dict[str, tuple[str, list[Any]]] = {}
        if isinstance(values.get("search_vector"), tuple):  # (SQL, parameters): computed by PostgreSQL
            expressions["search_vector"] = values.pop("search_vector")
        if status == ItemStatus.COMPLETED:
            expressions.update(embedding_indexed())  # into the HNSW graphs, in the update that completes the item
        carried = carry() if carry is not None else None
        inserts = [Rows(ModerationDecision, _decision_rows(item, decisions), ignore_conflicts=True, if_updated=True)]
        if carried is not None:
            inserts.append(carried.rows)
            transaction.on_commit(carried.written)
        announce = outbox_event_rows(
            stream=STREAM_ITEM_EVENTS,
            event_type=event_type,
            subject=str(item.pk),
            data={
                "item_id": str(item.pk),
                "author_id": str(item.author_id),
                "status": status,
                "reason": fields.get("reason", ""),
            },
            correlation_id=cause.correlation_id,
            causation_id=cause.event_id,
            traceparent=cause.traceparent,
            replay=cause.replay,
        )
        inserts.append(announce)  # only when the update changed the row
        where = _held_by(item, token)
        if not update_carrying(ProcessedItem, values, where=where, inserts=inserts, expressions=expressions):
            return False  # deleted meanwhile, or the claim was taken over: nothing but the carried rows
        outbox_event_written()
        if status == ItemStatus.COMPLETED:
            feed_invalidate_on_commit()
    item.status = status
    if status == ItemStatus.COMPLETED and item.pending_embedding is not None:
        item.embedding, item.pending_embedding = item.pending_embedding, None
    return True


def _record(item: ProcessedItem, decisions: Sequence[Decision]) -> None:
    """Append the decisions to the item's history, in its current run. A redelivered entry runs the steps again
    (after a crash, a lost lease, an outage) and decides the same passes again: the first pass of each stage in
    a run is kept and the repeats are dropped (ON CONFLICT DO NOTHING on decision_pass_once_per_run)."""
    insert_rows(ModerationDecision, _decision_rows(item, decisions), ignore_conflicts=True)


def _decision_rows(item: ProcessedItem, decisions: Sequence[Decision]) -> list[dict[str, Any]]:
    return [
        {
            "item_id": item.pk,
            "actor": "pipeline",
            "stage": d.stage,
            "verdict": d.verdict,
            "category": d.category,
            "reason": d.reason[:4000],
            "model": d.model,
            "created_at": d.at,
            "run": item.run,
        }
        for d in decisions
    ]


def parse_expire_time(value: str, *, now: datetime | None = None) -> datetime | None:
    """The model's ISO 8601 expire_time, or None when empty or unparseable (never a database error); at most
    ITEM_EXPIRY_MAX_DAYS ahead (items.expiry)."""
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if timezone.is_naive(parsed):
        parsed = parsed.replace(tzinfo=UTC)
    return expiry_capped(parsed, now=now)


def item_embeddings_store(*, vectors: dict[int, list[float]], model: str) -> int:
    """Replace stored embeddings with the embedding `model`'s (`manage.py reembed_items`), indexed or pending, and
    stamp the rows with it; returns how many rows changed. Only the vectors and their model change; status, groups
    and every other field stay as they are. One transaction: a batch is done entirely or not at all, so an
    interrupted re-embed resumes at the first row still of another model."""
    changed = 0
    with transaction.atomic():
        for item_id, vector in vectors.items():
            row = ProcessedItem.objects.filter(pk=item_id)
            indexed = row.filter(embedding__isnull=False).update(embedding=vector, embedding_model=model)
            pending = row.filter(pending_embedding__isnull=False).update(
                pending_embedding=vector, embedding_model=model
            )
            changed += bool(indexed or pending)
    return changed
