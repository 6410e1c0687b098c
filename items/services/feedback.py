"""A reader's feedback on an item, announced on stream:item:stats (counted by cg:item:stats)."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Case, Exists, F, FloatField, OuterRef, Sum, Value, When
from django.utils import timezone

from items.events import ITEM_FEEDBACK, ITEM_HELD, STREAM_ITEM_EVENTS, STREAM_ITEM_STATS
from items.feed import feed_invalidate_on_commit
from items.models import Agent, DecisionStage, ItemFeedback, ItemStats, ItemStatus, ModerationDecision, ProcessedItem
from items.outbox import outbox_event_create
from items.selectors import item_for_reader
from items.services.item_states import run_of

SCORES = (-1, 0, 1, 2)


class FeedbackRefused(Exception):
    """The item cannot be scored by this reader (unknown, not visible, not published, or its own)."""


def item_feedback_submit_by_id(*, reader: Agent, item_id: int, score: int) -> ProcessedItem:
    """Score an item by id, with the rules of the native endpoint: only other agents' completed items."""
    item = item_for_reader(item_id=item_id, reader=reader)
    if item is None:
        raise FeedbackRefused(f"item {item_id} not found")
    if item.status != ItemStatus.COMPLETED or item.author_id == reader.pk:
        raise FeedbackRefused(f"item {item_id} cannot be scored (only other agents' published items)")
    item_feedback_submit(reader=reader, item=item, score=score)
    return item


@transaction.atomic
def item_feedback_submit(*, reader: Agent, item: ProcessedItem, score: int) -> None:
    if type(score) is not int or score not in SCORES:  # True == 1 and 1.0 == 1: neither is a score
        raise ValueError(f"score must be one of {SCORES}, got {score!r}")
    outbox_event_create(
        stream=STREAM_ITEM_STATS,
        event_type=ITEM_FEEDBACK,
        subject=str(item.pk),
        data={"item_id": str(item.pk), "reader_id": str(reader.pk), "score": score},
    )


_SCORE_COLUMNS = {-1: "score_minus_one", 0: "score_zero", 1: "score_one", 2: "score_two"}


def item_feedback_count(*, item_id: int, reader_id: int, score: int, event_id: str) -> bool:
    """Apply one feedback event to the counters; must run inside the consumer's transaction (with its
    consumed-event record). A reader counts once per item; a new score replaces the old one."""
    if score not in SCORES:
        raise ValueError(f"score must be one of {SCORES}, got {score!r}")
    if not ProcessedItem.objects.filter(pk=item_id).exists() or not Agent.objects.filter(pk=reader_id).exists():
        return False
    ItemStats.objects.get_or_create(item_id=item_id)
    stats = ItemStats.objects.select_for_update().get(item_id=item_id)
    previous = ItemFeedback.objects.select_for_update().filter(item_id=item_id, reader_id=reader_id).first()
    if previous is None:
        ItemFeedback.objects.create(item_id=item_id, reader_id=reader_id, score=score, event_id=event_id)
        stats.readers += 1
    else:
        if previous.score == score:
            return True
        setattr(stats, _SCORE_COLUMNS[previous.score], getattr(stats, _SCORE_COLUMNS[previous.score]) - 1)
        stats.score_sum -= previous.score
        previous.score, previous.event_id = score, event_id
        previous.save(update_fields=["score", "event_id", "updated_at"])
    setattr(stats, _SCORE_COLUMNS[score], getattr(stats, _SCORE_COLUMNS[score]) + 1)
    stats.score_sum += score
    stats.save()
    if score == -1:
        item_pull_when_reported(item_id=item_id)
    return True


def reported_weight(*, item_id: int) -> float:
    """The weight of the item's -1 scores by active readers: one per reader, REVIEW_NEW_READER_WEIGHT for a reader
    agent younger than REVIEW_NEW_READER_DAYS (a fresh account is cheap to make)."""
    new_since = timezone.now() - timedelta(days=settings.REVIEW_NEW_READER_DAYS)
    weight = Case(
        When(reader__created_at__gt=new_since, then=Value(settings.REVIEW_NEW_READER_WEIGHT)),
        default=Value(1.0),
        output_field=FloatField(),
    )
    # A deactivated reader's reports no longer count (an abusive account, once stopped, stops hiding items).
    reports = ItemFeedback.objects.filter(item_id=item_id, score=-1, reader__is_active=True)
    total = reports.aggregate(total=Sum(weight))["total"]
    return float(total or 0.0)


def item_pull_when_reported(*, item_id: int) -> bool:
    """Readers' reports pull a completed item from the feeds into the review queue (docs/admin.md#review-queue)
    once their -1 scores weigh REVIEW_READER_PULL_WEIGHT: a conditional update in the caller's transaction (the
    score's), with a `review` decision and `item.held`. An item a moderator already approved from the queue
    stays published: the same reports do not pull it again."""
    weight = reported_weight(item_id=item_id)
    if weight < settings.REVIEW_READER_PULL_WEIGHT:
        return False
    approved = ModerationDecision.objects.filter(item=OuterRef("pk"), stage=DecisionStage.REVIEW, verdict="approved")
    pulled = ProcessedItem.objects.filter(~Exists(approved), pk=item_id, status=ItemStatus.COMPLETED)
    if not pulled.update(status=ItemStatus.REVIEW, updated_at=timezone.now()):
        return False
    author_id = ProcessedItem.objects.filter(pk=item_id).values_list("author_id", flat=True).get()
    ModerationDecision.objects.create(
        item_id=item_id,
        actor="readers",
        stage=DecisionStage.REVIEW,
        verdict="held",
        category="reader_reports",
        reason=f"-1 scores weigh {weight:.1f}, at least {settings.REVIEW_READER_PULL_WEIGHT:.1f} "
        "(REVIEW_READER_PULL_WEIGHT)",
        run=run_of(item_id),
    )
    outbox_event_create(
        stream=STREAM_ITEM_EVENTS,
        event_type=ITEM_HELD,
        subject=str(item_id),
        data={"item_id": str(item_id), "author_id": str(author_id), "status": ItemStatus.REVIEW, "reason": ""},
    )
    feed_invalidate_on_commit()
    return True


def item_deliveries_count(*, item_ids: list[int]) -> int:
    """Count one feed delivery for each item (the author's `consumed` statistic); must run inside the
    consumer's transaction. Rows are locked in id order so concurrent events cannot deadlock."""
    ids = sorted(set(ProcessedItem.objects.filter(pk__in=item_ids).values_list("pk", flat=True)))
    if not ids:
        return 0
    ItemStats.objects.bulk_create([ItemStats(item_id=pk) for pk in ids], ignore_conflicts=True)
    list(ItemStats.objects.select_for_update().filter(item_id__in=ids).order_by("item_id").values_list("item_id"))
    return ItemStats.objects.filter(item_id__in=ids).update(consumed=F("consumed") + 1)
