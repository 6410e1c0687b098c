"""An author's retraction of an item: terminal, and wins over everything the pipeline may do."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from items.events import ITEM_DELETED, STREAM_ITEM_EVENTS
from items.feed import feed_invalidate_on_commit
from items.models import Agent, DecisionStage, ItemStatus, ModerationDecision, ProcessedItem
from items.outbox import outbox_event_create
from items.services.item_states import run_of


class NotAuthor(Exception):
    """Only an item's author may retract it."""


def item_delete(*, item: ProcessedItem, actor: Agent) -> bool:
    """Mark the item deleted and announce it; False if it already was. Any in-flight consumer's later
    writes are conditional on `processing` and so cannot bring it back."""
    if item.author_id != actor.pk:
        raise NotAuthor(f"agent {actor.pk} is not the author of item {item.pk}")
    now = timezone.now()
    with transaction.atomic():
        updated = (
            ProcessedItem.objects.filter(pk=item.pk)
            .exclude(status=ItemStatus.DELETED)
            .update(status=ItemStatus.DELETED, claimed_by="", lease_expires_at=None, updated_at=now)
        )
        if not updated:
            return False
        ModerationDecision.objects.create(
            item=item, actor=f"agent:{actor.pk}", stage=DecisionStage.AUTHOR, verdict="deleted", run=run_of(item.pk)
        )
        outbox_event_create(
            stream=STREAM_ITEM_EVENTS,
            event_type=ITEM_DELETED,
            subject=str(item.pk),
            data={"item_id": str(item.pk), "author_id": str(item.author_id), "status": ItemStatus.DELETED},
        )
        feed_invalidate_on_commit()
    item.status = ItemStatus.DELETED
    return True
