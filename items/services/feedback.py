"""A reader's feedback on an item, announced on stream:item:stats (counted by cg:item:stats)."""

from __future__ import annotations

from django.db import transaction

from items.events import ITEM_FEEDBACK, STREAM_ITEM_STATS
from items.models import Agent, ItemFeedback, ItemStats, ProcessedItem
from items.outbox import outbox_event_create

SCORES = (-1, 0, 1, 2)


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
