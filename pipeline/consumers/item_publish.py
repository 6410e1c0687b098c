"""cg:item:publish: claims each published item and runs its enrichment (pipeline.enrichment)."""

from __future__ import annotations

import uuid

from django.conf import settings

from items.events import ITEM_PUBLISHED, STREAM_ITEM_PUBLISH
from items.services.enrichment import Claim, claim_token, item_claim
from pipeline.enrichment import Enrichment
from pipeline.runtime import Consumer, DeadLetterNow, Event, NothingToDo, RetryLater, register


@register
class ItemPublishConsumer(Consumer):
    name = "item-publish"
    stream = STREAM_ITEM_PUBLISH
    group = "cg:item:publish"
    event_types = frozenset({ITEM_PUBLISHED})

    def __init__(self) -> None:
        # Identifies this consumer instance in item claims (see items.services.enrichment.claim_token).
        self.holder = uuid.uuid4().hex[:12]

    def handle(self, event: Event) -> None:
        try:
            item_id = int(event.data["item_id"])
        except (KeyError, TypeError, ValueError):
            raise DeadLetterNow(f"event data has no valid item_id: {event.data!r}"[:500]) from None
        token = claim_token(message_id=event.message_id, holder=self.holder)
        state, item = item_claim(item_id=item_id, token=token, lease_seconds=settings.ENRICHMENT_LEASE_SECONDS)
        if state is Claim.MISSING:
            raise DeadLetterNow(f"unknown item {item_id}")
        if state is Claim.CHECKPOINT:
            raise NothingToDo(f"item {item_id} is already {item.status}")
        if state is Claim.BUSY:
            raise RetryLater(f"item {item_id} is being enriched by another consumer")
        Enrichment(item=item, token=token, event=event, max_deliveries=self.get_retry_policy().max_retries).run()
