"""cg:item:publish: claims each published item and runs its enrichment (pipeline.enrichment_steps)."""

from __future__ import annotations

import uuid

import redis
from django.conf import settings

from eigenflux.base.redis import get_redis
from items.events import ITEM_PUBLISHED, STREAM_ITEM_PUBLISH
from items.models import ItemStatus, RawItem
from items.services.enrichment_state import Cause, Claim, claim_token, item_give_up
from items.services.item_claim import item_claim_with_duplicate
from pipeline import llm
from pipeline.analyzer_models import active_gates
from pipeline.enrichment_steps import Enrichment, item_terminal
from pipeline.llm.accounting import deferred_rows
from pipeline.runtime import Consumer, DeadLetterNow, Event, GiveUp, NothingToDo, RetryLater, register
from pipeline.runtime.liveness import consumer_alive


@register
class ItemPublishConsumer(Consumer):
    name = "item-publish"
    stream = STREAM_ITEM_PUBLISH
    group = "cg:item:publish"
    event_types = frozenset({ITEM_PUBLISHED})

    def __init__(self) -> None:
        # Identifies this consumer instance in item claims (see items.services.enrichment_state.claim_token).
        self.holder = uuid.uuid4().hex[:12]

    def warm_up(self) -> None:
        llm.warm_up()  # the local analyzer's models, before the first entry (pipeline.llm.local.warm)

    def handle(self, event: Event) -> None:
        try:
            item_id = int(event.data["item_id"])
        except (KeyError, TypeError, ValueError):
            raise DeadLetterNow(f"event data has no valid item_id: {event.data!r}"[:500]) from None
        token = claim_token(message_id=event.message_id, holder=self.holder)
        state, item, duplicate = item_claim_with_duplicate(
            item_id=item_id, token=token, lease_seconds=settings.ENRICHMENT_LEASE_SECONDS
        )
        if state is Claim.MISSING or item is None:
            raise DeadLetterNow(f"unknown item {item_id}")
        if state is Claim.CHECKPOINT:
            raise NothingToDo(f"item {item_id} is already {item.status}")
        if state is Claim.BUSY:
            raise RetryLater(f"item {item_id} is being enriched by another consumer")
        active_gates()  # the analyzer judges with the active learned gates (re-read at most every 30 s)
        # LLMCall rows are written with the checkpoint each call's result goes into (one transaction).
        with deferred_rows():
            Enrichment(item=item, token=token, event=event, duplicate=duplicate).run()

    def on_dead_letter(self, event: Event | None, reason: GiveUp) -> None:
        """Exhaustion ends in `failed`: the item gets the reason and its outcome event before the entry is
        dead-lettered (a moderator can requeue it at once). Idempotent, as the runtime requires."""
        item_id = str((event.data if event is not None else {}).get("item_id", ""))
        if event is None or not item_id.isdigit():
            return  # malformed: there is no item to fail
        failed = item_give_up(
            item_id=int(item_id),
            message_id=event.message_id,
            error_class=reason.error_class,
            error=reason.error,
            cause=Cause(
                event_id=event.id,
                correlation_id=event.correlation_id,
                traceparent=event.traceparent,
                replay=event.replay,
            ),
        )
        if failed:
            published_at = RawItem.objects.filter(pk=int(item_id)).values_list("created_at", flat=True).first()
            if published_at is not None:
                item_terminal(int(item_id), ItemStatus.FAILED, published_at, f"gave up: {reason.error_class}")


def claim_holder_gone(token: str) -> bool:
    """items.services.moderation's port: is the consumer holding this claim's stream entry gone? True when the
    entry is no longer pending in the group (finished, dead-lettered, trimmed) or its consumer stopped
    reporting alive; False when it is alive, or when Redis cannot tell (then only the lease decides)."""
    message_id = token.split("@", 1)[0]
    group = ItemPublishConsumer.group
    client = get_redis()
    try:
        pending = client.xpending_range(ItemPublishConsumer.stream, group, message_id, message_id, 1)
        return not pending or not consumer_alive(client, str(pending[0]["consumer"]))
    except redis.ResponseError:
        return True  # no such stream or group: nothing holds the entry
    except (redis.RedisError, ValueError):
        return False
