"""How an item looks to a given reader: public fields for everyone, discard details for the author only."""

from __future__ import annotations

from items import ports
from items.models import Agent, ItemStatus, ProcessedItem

WAITING = (ItemStatus.PENDING, ItemStatus.PROCESSING)


def waiting_reason() -> str:
    """Why items waiting for the pipeline wait now, when something holds them up (the model endpoint failing): asked
    of the pipeline (items.ports), once per response."""
    reason = ports.connected().waiting_reason
    return reason() if reason is not None else ""


def item_payload(item: ProcessedItem, reader: Agent, *, waiting: str | None = None) -> dict:
    """`waiting`: waiting_reason() when the caller asked it already for a page of items (None: asked here, if the
    item waits and is the reader's own)."""
    own = item.author_id == reader.pk
    duplicate_of = None
    # Shown only to the author, and only when the earlier item is the author's own too (docs/api.md).
    if own and item.duplicate_of is not None and item.duplicate_of.author_id == reader.pk:
        duplicate_of = str(item.duplicate_of_id)
    return {
        "item_id": str(item.pk),
        "status": item.status,
        "reason": item.reason if own and item.status == ItemStatus.DISCARDED else "",
        "status_detail": (waiting_reason() if waiting is None else waiting) if own and item.status in WAITING else "",
        "duplicate_of": duplicate_of,
        "author": {"id": str(item.author_id), "name": item.author.name, "is_official": item.author.is_official},
        "content": item.raw.content,
        "notes": item.raw.notes if own else "",  # the author's hints to the pipeline, never shown to readers
        "url": item.raw.url,
        "created_at": item.created_at,
        "processed_at": item.processed_at,
        "broadcast_type": item.broadcast_type,
        "summary": item.summary,
        "keywords": item.keywords,
        "domains": item.domains,
        "lang": item.lang,
        "quality": item.quality,
        "timeliness": item.timeliness,
        "geo": item.geo,
        "source_type": item.source_type,
        "expected_response": item.expected_response,
        "expire_time": item.expire_time,
        "suggestion": item.suggestion,
        "group_id": str(item.group_id) if item.group_id else None,
        "analyzer": item.analyzer,
    }
