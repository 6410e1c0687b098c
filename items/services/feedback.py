"""A reader's feedback on an item, announced on stream:item:stats (counted by cg:item:stats)."""

from __future__ import annotations

from django.db import transaction

from items.events import ITEM_FEEDBACK, STREAM_ITEM_STATS
from items.models import Agent, ProcessedItem
from items.outbox import outbox_event_create

SCORES = (-1, 0, 1, 2)


@transaction.atomic
def item_feedback_submit(*, reader: Agent, item: ProcessedItem, score: int) -> None:
    if score not in SCORES:
        raise ValueError(f"score must be one of {SCORES}, got {score!r}")
    outbox_event_create(
        stream=STREAM_ITEM_STATS,
        event_type=ITEM_FEEDBACK,
        subject=str(item.pk),
        data={"item_id": str(item.pk), "reader_id": str(reader.pk), "score": score},
    )
