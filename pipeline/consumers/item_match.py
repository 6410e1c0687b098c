"""cg:item:match: pushes `item.matched` to the online agents a newly completed item matches
(items.services.match_push; docs/feed.md#match-push)."""

from __future__ import annotations

import logging

import redis

from items.events import ITEM_COMPLETED, ITEM_MILESTONE, OUTCOME_TYPES, STREAM_ITEM_EVENTS
from items.services.match_push import RateLimitUnavailable, item_match_push
from pipeline.runtime import Consumer, DeadLetterNow, Event, NothingToDo, RetryLater, register

log = logging.getLogger("items.services.match_push")  # beside the service's own decisions (docs/feed.md)


@register
class ItemMatchConsumer(Consumer):
    name = "item-match"
    stream = STREAM_ITEM_EVENTS
    group = "cg:item:match"
    event_types = frozenset({ITEM_COMPLETED})
    # Only a completed item can match a reader; the stream's other events are the other groups' business.
    ignores = (OUTCOME_TYPES | {ITEM_MILESTONE}) - {ITEM_COMPLETED}

    def handle(self, event: Event) -> None:
        item_id = str(event.data.get("item_id") or "")
        if not item_id.isdigit():
            raise DeadLetterNow(f"item.completed event without item_id: {event.data!r}"[:500])
        if event.replay:
            log.info("match push of item %s: nobody, the completion is a replay (old news)", item_id)
            raise NothingToDo("a replayed completion is old news: no push")
        try:
            pushed = item_match_push(item_id=int(item_id), event_id=event.id, time=event.envelope.get("time", ""))
        except (OSError, redis.RedisError, RateLimitUnavailable) as exc:
            raise RetryLater(f"Redis or the channel layer unavailable: {exc}") from exc
        if not pushed:
            raise NothingToDo("pushed to nobody (the match push log line says why)")
