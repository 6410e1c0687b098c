"""Reads of which stored vectors another embedding model made than the configured one (ProcessedItem and
ReaderProfile `embedding_model`): what the start-up check reports and what `manage.py reembed_items` rewrites."""

from __future__ import annotations

from django.db.models import Count, Q, QuerySet

from items.models import ProcessedItem, ReaderProfile

ITEM_VECTORS = Q(embedding__isnull=False) | Q(pending_embedding__isnull=False)  # indexed, or a checkpoint
PROFILE_VECTORS = Q(seeks_embedding__isnull=False) | Q(offers_embedding__isnull=False)


def items_to_reembed(*, model: str) -> QuerySet[ProcessedItem]:
    """Items holding a vector not made by `model` ("" counts as another model: its maker is unknown)."""
    return ProcessedItem.objects.filter(ITEM_VECTORS).exclude(embedding_model=model)


def profiles_to_reembed(*, model: str) -> QuerySet[ReaderProfile]:
    return ReaderProfile.objects.filter(PROFILE_VECTORS).exclude(embedding_model=model)


def other_models(*, model: str) -> dict[str, dict[str, int]]:
    """{"items": {other model: rows}, "profiles": {...}}; empty dicts when every vector is `model`'s. A sequential
    read of both tables (no index holds the model): for the check and the command, not for a request."""
    counts: dict[str, dict[str, int]] = {}
    for name, queryset in (("items", items_to_reembed(model=model)), ("profiles", profiles_to_reembed(model=model))):
        rows = queryset.order_by().values_list("embedding_model").annotate(rows=Count("pk"))
        counts[name] = {other or "(unknown)": rows for other, rows in rows}
    return counts
