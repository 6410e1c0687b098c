"""The field values an item's state changes share, so the pipeline's transitions (items.services.enrichment_state)
and the moderator's (items.services.moderation) reset an item the same way: one place says what "released",
"back to pending", "a new run" and "re-judged" mean."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db.models import F, Subquery
from django.db.models.functions import Coalesce

from items.models import ItemStatus, ProcessedItem, PublicReason


def unclaimed() -> dict[str, Any]:
    """No consumer holds the item any more."""
    return {"claimed_by": "", "lease_expires_at": None}


def back_to_pending(*, now: datetime) -> dict[str, Any]:
    """Ready to be enriched again, with no outcome and a fresh delivery count; checkpoints are kept."""
    return {
        "status": ItemStatus.PENDING,
        "reason": PublicReason.NONE,
        "duplicate_of": None,
        **unclaimed(),
        "attempts": 0,
        "last_error": "",
        "updated_at": now,
    }


def new_run() -> dict[str, Any]:
    """A moderator sends the item round the pipeline again: its next decisions belong to a new run, in which
    each step's pass is recorded once more (docs/enrichment.md#decisions-and-their-order)."""
    return {"run": F("run") + 1}


def run_of(item_id: int) -> Subquery:
    """The item's run as the writing transaction sees it, for a decision inserted after the item's update."""
    return Subquery(ProcessedItem.objects.filter(pk=item_id).values("run")[:1])


def without_judgements() -> dict[str, Any]:
    """The model's judgements dropped (safety pass, extraction, suggestion): the next enrichment asks for each
    again. The embedding stays: it depends only on the text, which never changes, and on the embedding model,
    whose change `manage.py reembed_items` applies to every stored vector; asking again would pay for the same
    vector (docs/admin.md#moderating-items)."""
    return {"safety_passed_at": None, "safety_risk": None, "extraction": None, "suggestion": "", "suggested_at": None}


def embedding_indexed() -> dict[str, Any]:
    """What completing an item does to its vectors: the embedding checkpoint (`pending_embedding`, unindexed)
    moves into `embedding`, the column the HNSW graphs index; an item completed before keeps its own. SQL text
    for the pipeline's prepared-shape update (eigenflux.base.sqlrows.update_where's `expressions`)."""
    return {
        "embedding": ('COALESCE("pending_embedding", "embedding")', []),
        "pending_embedding": ("NULL", []),
    }


def embedding_indexed_orm() -> dict[str, Any]:
    """embedding_indexed() as QuerySet.update() arguments, for a moderator's approval."""
    return {"embedding": Coalesce(F("pending_embedding"), F("embedding")), "pending_embedding": None}


def outcome(*, status: str, now: datetime) -> dict[str, Any]:
    """A terminal outcome: unclaimed, the extraction checkpoint dropped (its fields are on the row now)."""
    return {"status": status, **unclaimed(), "extraction": None, "processed_at": now, "updated_at": now}
