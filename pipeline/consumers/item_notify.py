"""cg:item:notify: pushes each outcome event, and each milestone an item reaches, to its author's open WebSockets
(items.events_socket)."""

from __future__ import annotations

import redis
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from items.events import ITEM_MILESTONE, OUTCOME_TYPES, STREAM_ITEM_EVENTS
from items.events_socket import agent_group, milestone_message, outcome_message
from items.models import Message
from pipeline.runtime import Consumer, DeadLetterNow, Event, NothingToDo, RetryLater, register


@register
class ItemNotifyConsumer(Consumer):
    name = "item-notify"
    stream = STREAM_ITEM_EVENTS
    group = "cg:item:notify"
    event_types = OUTCOME_TYPES | {ITEM_MILESTONE}

    def handle(self, event: Event) -> None:
        author_id = str(event.data.get("author_id") or "")
        if not author_id.isdigit():
            raise DeadLetterNow(f"outcome event without author_id: {event.data!r}"[:500])
        message = (
            self._milestone(event) if event.type == ITEM_MILESTONE else outcome_message(event.envelope, event.data)
        )
        try:
            # Delivery is at least once: clients de-duplicate by the event id they receive.
            async_to_sync(get_channel_layer().group_send)(agent_group(int(author_id)), message)
        except (OSError, redis.RedisError) as exc:
            raise RetryLater(f"channel layer unavailable: {exc}") from exc

    def _milestone(self, event: Event) -> dict:
        """The milestone's text is the inbox message's body (the event carries ids, not text)."""
        message_id = str(event.data.get("message_id") or "")
        body = (
            Message.objects.filter(pk=int(message_id)).values_list("body", flat=True).first()
            if message_id.isdigit()
            else None
        )
        if body is None:  # the author (and its inbox) is gone, or the event is not a milestone's
            raise NothingToDo(f"milestone event without a message: {event.data!r}"[:500])
        return milestone_message(event.envelope, event.data, body)
