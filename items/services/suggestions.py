"""The reader suggestion of an item a moderator published (docs/enrichment.md#suggestion): the enrichment writes
one only for an item it publishes, so approving a held or discarded item asks for it here. Asked through the
pipeline's port (a job after the approval commits, never a model call in the moderator's request), claimed once,
so a job run twice, or two approvals, never pay for it twice."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from items import ports
from items.models import ItemStatus, ProcessedItem


def item_suggestion_request(*, item_id: int) -> bool:
    """Inside the approval's transaction: ask for the item's suggestion once it commits. False when nobody answers
    (the pipeline app is not installed) or the item has one already (asked for before it was held)."""
    requester = ports.connected().suggestion_requester
    if requester is None:
        return False
    if not ProcessedItem.objects.filter(pk=item_id, suggested_at__isnull=True).exists():
        return False
    transaction.on_commit(lambda: requester(item_id))
    return True


def item_suggestion_claim(*, item_id: int) -> ProcessedItem | None:
    """Claim the asking for a published item's suggestion (its `suggested_at`, set while empty): the item with its
    content, or None when it is not published or was asked for already."""
    claimed = ProcessedItem.objects.filter(pk=item_id, status=ItemStatus.COMPLETED, suggested_at__isnull=True).update(
        suggested_at=timezone.now()
    )
    if not claimed:
        return None
    return ProcessedItem.objects.select_related("raw").only("summary", "broadcast_type", "raw__content").get(pk=item_id)


def item_suggestion_save(*, item_id: int, suggestion: str) -> bool:
    """Write the suggestion asked for (item_suggestion_claim), unless the item has one or was unpublished since."""
    return bool(
        ProcessedItem.objects.filter(pk=item_id, status=ItemStatus.COMPLETED, suggestion="").update(
            suggestion=suggestion, updated_at=timezone.now()
        )
    )
