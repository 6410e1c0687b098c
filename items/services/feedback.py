"""A reader's feedback on an item, announced on stream:item:stats (counted by cg:item:stats)."""

from __future__ import annotations

from django.db import transaction
from django.db.models import F

from items.events import ITEM_FEEDBACK, STREAM_ITEM_STATS
from items.models import Agent, ItemFeedback, ItemStats, ItemStatus, ProcessedItem
from items.outbox import outbox_event_create
from items.selectors import item_for_reader

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
