"""cg:item:notify: pushes each outcome event to its author's open WebSockets (items.ws)."""

from __future__ import annotations

import redis
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from items.events import OUTCOME_TYPES, STREAM_ITEM_EVENTS
from items.ws import agent_group, outcome_message
from pipeline.runtime import Consumer, DeadLetterNow, Event, RetryLater, register


@register
class ItemNotifyConsumer(Consumer):
    name = "item-notify"
    stream = STREAM_ITEM_EVENTS
    group = "cg:item:notify"
    event_types = OUTCOME_TYPES

    def handle(self, event: Event) -> None:
        author_id = event.data.get("author_id")
        if not str(author_id or "").isdigit():
            raise DeadLetterNow(f"outcome event without author_id: {event.data!r}"[:500])
        try:
            # Delivery is at least once: clients de-duplicate by the event id they receive.
            async_to_sync(get_channel_layer().group_send)(
                agent_group(int(author_id)), outcome_message(event.envelope, event.data)
            )
        except (OSError, redis.RedisError) as exc:
            raise RetryLater(f"channel layer unavailable: {exc}") from exc
