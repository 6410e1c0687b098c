"""cg:item:stats: feedback counters, exactly once per event and once per (reader, item); feed deliveries
(the `consumed` counter), exactly once per event; and the author milestones those counters reach, in the same
transaction (items.services.milestones)."""

from __future__ import annotations

from django.db import transaction

from items.events import ITEM_DELIVERED, ITEM_FEEDBACK, STREAM_ITEM_STATS
from items.services.feedback import SCORES, item_deliveries_count, item_feedback_count
from items.services.milestones import item_milestones_reach
from pipeline.official import official_agent
from pipeline.runtime import Consumer, DeadLetterNow, Event, NothingToDo, consume_once, register


@register
class ItemStatsConsumer(Consumer):
    name = "item-stats"
    stream = STREAM_ITEM_STATS
    group = "cg:item:stats"
    event_types = frozenset({ITEM_FEEDBACK, ITEM_DELIVERED})

    def handle(self, event: Event) -> None:
        if event.type == ITEM_DELIVERED:
            return self._delivered(event)
        try:
            item_id, reader_id = int(event.data["item_id"]), int(event.data["reader_id"])
            score = event.data["score"]
        except (KeyError, TypeError, ValueError):
            raise DeadLetterNow(f"feedback event without item_id/reader_id/score: {event.data!r}"[:500]) from None
        if score not in SCORES or isinstance(score, bool):
            raise DeadLetterNow(f"feedback score {score!r} is not one of {SCORES}")
        with transaction.atomic():
            event.lease.check()
            if not consume_once(event):
                raise NothingToDo(f"event {event.id} was already counted")
            if not item_feedback_count(item_id=item_id, reader_id=reader_id, score=score, event_id=event.id):
                raise DeadLetterNow(f"feedback for unknown item {item_id} or reader {reader_id}")
            item_milestones_reach(item_ids=[item_id], sender=official_agent)

    def _delivered(self, event: Event) -> None:
        item_ids = event.data.get("item_ids")
        if not isinstance(item_ids, list) or not all(isinstance(i, str) and i.isdigit() for i in item_ids):
            raise DeadLetterNow(f"delivery event without a list of item ids: {event.data!r}"[:500])
        with transaction.atomic():
            event.lease.check()
            if not consume_once(event):
                raise NothingToDo(f"event {event.id} was already counted")
            ids = [int(i) for i in item_ids]
            item_deliveries_count(item_ids=ids)
            item_milestones_reach(item_ids=ids, sender=official_agent)
