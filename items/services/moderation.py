"""A moderator's overrides on one item (docs/admin.md): requeue, approve, take down.

Each is one transaction: a conditional update (so two moderators, or a moderator and a consumer, cannot
both win), a ModerationDecision carrying the moderator's name, and the outbox event that announces it.
"""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from items import ports
from items.events import (
    ITEM_COMPLETED,
    ITEM_DISCARDED,
    ITEM_PUBLISHED,
    STREAM_ITEM_EVENTS,
    STREAM_ITEM_PUBLISH,
)
from items.feed import feed_invalidate_on_commit
from items.feed_ranking.concepts import item_concepts
from items.models import (
    VERDICT_TAKEN_DOWN,
    DecisionStage,
    ItemStatus,
    ModerationDecision,
    ProcessedItem,
    PublicReason,
)
from items.outbox import outbox_event_create
from items.selectors import duplicate_window_start
from items.services.item_states import (
    back_to_pending,
    embedding_indexed_orm,
    new_run,
    outcome,
    run_of,
    unclaimed,
    without_judgements,
)
from items.services.suggestions import item_suggestion_request
from items.textsearch import search_vector

# Which states each action starts from. Pending and processing items are the pipeline's: requeueing or
# approving them would race the consumer — except a `processing` item whose claim holder is dead (a stuck
# item, see claim_is_dead), which requeue releases. A deleted item belongs to its author; nobody changes it.
REQUEUE_FROM = (ItemStatus.COMPLETED, ItemStatus.DISCARDED, ItemStatus.FAILED, ItemStatus.REVIEW)


def claim_is_dead(item: ProcessedItem) -> bool:
    """A `processing` item whose claim nobody can still finish: its lease expired, or the consumer holding
    its stream entry is gone."""
    if item.status != ItemStatus.PROCESSING:
        return False
    if item.lease_expires_at is None or item.lease_expires_at < timezone.now():
        return True
    holder_gone = ports.connected().claim_holder_gone  # the pipeline's answer (items.ports)
    return bool(item.claimed_by) and holder_gone is not None and holder_gone(item.claimed_by)


def requeue_allowed(item: ProcessedItem) -> bool:
    return item.status in REQUEUE_FROM or claim_is_dead(item)


APPROVE_FROM = (ItemStatus.DISCARDED, ItemStatus.FAILED)
TAKEDOWN_FROM = (ItemStatus.PENDING, ItemStatus.PROCESSING, ItemStatus.COMPLETED, ItemStatus.FAILED)

# Sent with the publish event of an approved item whose extraction never ran: the enrichment consumer
# skips the gates (blacklist, duplicate, safety, discard, quality) and only extracts.
OVERRIDE_APPROVE = "approve"


class ActionRefused(Exception):
    """The action makes no sense for the item in its current state; the message says why."""


def _refuse(action: str, item_id: int, allowed: tuple[str, ...]) -> ActionRefused:
    status = ProcessedItem.objects.filter(pk=item_id).values_list("status", flat=True).first()
    if status is None:
        return ActionRefused(f"item {item_id} does not exist")
    if status == ItemStatus.DELETED:
        return ActionRefused(f"item {item_id} was deleted by its author; it cannot be changed")
    return ActionRefused(
        f"cannot {action} item {item_id}: it is {status} (only {', '.join(str(s) for s in allowed)} items)"
    )


def _decide(
    item: ProcessedItem,
    moderator: User,
    verdict: str,
    reason: str = "",
    category: str = "",
    stage: str = DecisionStage.MODERATOR,
) -> None:
    ModerationDecision.objects.create(
        item=item,
        actor=moderator.get_username(),
        moderator=moderator,
        stage=stage,
        verdict=verdict,
        category=category,
        reason=reason[:4000],
        run=run_of(item.pk),
    )


def _publish(item: ProcessedItem, **extra: str) -> None:
    feed_invalidate_on_commit()  # a requeued item leaves the feed until it completes again
    outbox_event_create(
        stream=STREAM_ITEM_PUBLISH,
        event_type=ITEM_PUBLISHED,
        subject=str(item.pk),
        data={"item_id": str(item.pk), "author_id": str(item.author_id), **extra},
        replay=True,
    )


def _outcome(item: ProcessedItem, event_type: str, status: str, reason: str = "") -> None:
    feed_invalidate_on_commit()
    outbox_event_create(
        stream=STREAM_ITEM_EVENTS,
        event_type=event_type,
        subject=str(item.pk),
        data={"item_id": str(item.pk), "author_id": str(item.author_id), "status": status, "reason": reason},
    )


def item_requeue(*, item: ProcessedItem, moderator: User, note: str = "") -> ProcessedItem:
    """Run enrichment again as a new run: back to pending without the model's judgements (the embedding is
    kept), republished with replay set.

    A terminal item, or a stuck one: `processing` under a claim whose holder is dead is released at once
    (the update is conditional on that very claim, so a claim that changed meanwhile is left alone)."""
    now = timezone.now()
    current = ProcessedItem.objects.filter(pk=item.pk).only("status", "claimed_by", "lease_expires_at").first()
    requeueable = Q(status__in=REQUEUE_FROM)
    if current is not None and claim_is_dead(current):
        requeueable |= Q(status=ItemStatus.PROCESSING, claimed_by=current.claimed_by)
    with transaction.atomic():
        updated = ProcessedItem.objects.filter(requeueable, pk=item.pk).update(
            **back_to_pending(now=now), **without_judgements(), **new_run()
        )
        if not updated:
            raise _refuse("requeue", item.pk, (*REQUEUE_FROM, "stuck processing"))
        _decide(item, moderator, "requeued", reason=note)
        _publish(item)
    item.refresh_from_db()
    return item


def item_approve(*, item: ProcessedItem, moderator: User, note: str = "") -> ProcessedItem:
    """Override a discard (or a failure). With extracted fields the item completes at once; without, it goes
    back to the pipeline with `override=approve`, which runs extraction only and completes it."""
    now = timezone.now()
    with transaction.atomic():
        # Lock the row so the choice between the two paths is made on the state the update will see.
        current = ProcessedItem.objects.select_for_update().select_related("raw").filter(pk=item.pk).first()
        if current is None or current.status not in APPROVE_FROM:
            raise _refuse("approve", item.pk, APPROVE_FROM)
        # Extracted fields are on the row only once an outcome was written (completed or discarded after the
        # extraction). An extraction checkpoint alone (analyzer and extraction set, summary empty: the item
        # failed later) goes back to the pipeline, which reuses the checkpoint instead of paying again.
        extracted = bool(current.summary)
        if extracted:
            search = search_vector(summary=current.summary, keywords=current.keywords, content=current.raw.content)
            ProcessedItem.objects.filter(pk=item.pk).update(
                **unclaimed(),
                **embedding_indexed_orm(),
                status=ItemStatus.COMPLETED,
                reason=PublicReason.NONE,
                duplicate_of=None,
                last_error="",
                search_vector=search,
                concepts=item_concepts(current.raw.content, current.keywords),
                processed_at=now,
                updated_at=now,
            )
            _decide(item, moderator, "approved", reason=note, category="completed")
            _outcome(item, ITEM_COMPLETED, ItemStatus.COMPLETED)
            item_suggestion_request(item_id=item.pk)  # a discarded item was never given one
        else:
            ProcessedItem.objects.filter(pk=item.pk).update(**back_to_pending(now=now), **new_run())
            _decide(item, moderator, "approved", reason=note, category="extraction_pending")
            _publish(item, override=OVERRIDE_APPROVE)
    item.refresh_from_db()
    return item


def item_takedown(*, item: ProcessedItem, moderator: User, reason: str) -> ProcessedItem:
    """A moderator's discard: the author sees the public reason `content_evaluation`, moderators the text."""
    reason = reason.strip()
    if not reason:
        raise ActionRefused("a take-down needs a reason")
    now = timezone.now()
    with transaction.atomic():
        updated = ProcessedItem.objects.filter(pk=item.pk, status__in=TAKEDOWN_FROM).update(
            **outcome(status=ItemStatus.DISCARDED, now=now), reason=PublicReason.CONTENT_EVALUATION
        )
        if not updated:
            raise _refuse("take down", item.pk, TAKEDOWN_FROM)
        _decide(item, moderator, VERDICT_TAKEN_DOWN, reason=reason, category="takedown")
        _outcome(item, ITEM_DISCARDED, ItemStatus.DISCARDED, PublicReason.CONTENT_EVALUATION)
    item.refresh_from_db()
    return item


def item_review_approve(*, item: ProcessedItem, moderator: User, note: str = "") -> ProcessedItem:
    """A held item (`review`) is published: `completed` with its search vector, a `review` decision,
    `item.completed` and its reader suggestion asked for (after the commit, by a job). A held item always has its
    extracted fields (the pipeline holds at persist; readers pull completed items)."""
    now = timezone.now()
    with transaction.atomic():
        current = (
            ProcessedItem.objects.select_related("raw")
            .filter(pk=item.pk)
            .only("summary", "keywords", "raw__content", "raw__content_hash")
            .first()
        )
        published = _published_copy(current) if current else None
        if published is not None:
            raise ActionRefused(
                f"cannot approve item {item.pk}: the same text is published as item {published} (another author's "
                "copy, made while this one was held); reject this one, or take that one down first"
            )
        search = search_vector(
            summary=current.summary if current else "",
            keywords=current.keywords if current else [],
            content=current.raw.content if current else "",
        )
        updated = ProcessedItem.objects.filter(pk=item.pk, status=ItemStatus.REVIEW).update(
            **unclaimed(),
            **embedding_indexed_orm(),
            status=ItemStatus.COMPLETED,
            search_vector=search,
            concepts=item_concepts(current.raw.content if current else "", current.keywords if current else []),
            processed_at=now,
            updated_at=now,
        )
        if not updated:
            raise _refuse("approve", item.pk, (ItemStatus.REVIEW,))
        _decide(item, moderator, "approved", reason=note, category="published", stage=DecisionStage.REVIEW)
        _outcome(item, ITEM_COMPLETED, ItemStatus.COMPLETED)
        item_suggestion_request(item_id=item.pk)  # the pipeline gives a held item none
    item.refresh_from_db()
    return item


def _published_copy(item: ProcessedItem) -> int | None:
    """A completed item with the same text within the duplicate window: another author's copy of a held item is
    not its duplicate (items.selectors.exact_duplicate_of), so it may have been published meanwhile."""
    copies = ProcessedItem.objects.filter(
        status=ItemStatus.COMPLETED,
        raw__content_hash=item.raw.content_hash,
        raw__created_at__gte=duplicate_window_start(),
    )
    return copies.exclude(pk=item.pk).values_list("pk", flat=True).first()


def item_review_reject(*, item: ProcessedItem, moderator: User, reason: str) -> ProcessedItem:
    """A held item is refused: `discarded` with the public reason `content_evaluation` (the moderator's reason is
    for moderators), a `review` decision and `item.discarded`."""
    reason = reason.strip()
    if not reason:
        raise ActionRefused("a rejection needs a reason")
    now = timezone.now()
    with transaction.atomic():
        updated = ProcessedItem.objects.filter(pk=item.pk, status=ItemStatus.REVIEW).update(
            **outcome(status=ItemStatus.DISCARDED, now=now), reason=PublicReason.CONTENT_EVALUATION
        )
        if not updated:
            raise _refuse("reject", item.pk, (ItemStatus.REVIEW,))
        _decide(item, moderator, "rejected", reason=reason, category="rejected", stage=DecisionStage.REVIEW)
        _outcome(item, ITEM_DISCARDED, ItemStatus.DISCARDED, PublicReason.CONTENT_EVALUATION)
    item.refresh_from_db()
    return item
