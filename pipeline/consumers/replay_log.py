"""cg:replay:log: the impression log (docs/feed-log.md). Each feed page served becomes one FeedImpression row per
item; the page's event id and each position are a unique key, so a redelivered page writes nothing twice."""

from __future__ import annotations

from items.events import FEED_PAGE_SERVED, STREAM_REPLAY_LOG
from items.services.impressions import BadPage, impressions_store
from pipeline.runtime import Consumer, DeadLetterNow, Event, register


@register
class ReplayLogConsumer(Consumer):
    name = "replay-log"
    stream = STREAM_REPLAY_LOG
    group = "cg:replay:log"
    event_types = frozenset({FEED_PAGE_SERVED})

    def handle(self, event: Event) -> None:
        event.lease.check()
        try:
            impressions_store(page_id=event.id, data=event.data)
        except BadPage as exc:
            raise DeadLetterNow(str(exc)) from exc
