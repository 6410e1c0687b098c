"""The feed's candidates (docs/feed.md#candidates): a few bounded, index-backed sources merged, then narrowed to
what the reader may be served (visible, not its own, one per similarity group, not already served)."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import BigIntegerField
from django.db.models.functions import Coalesce

from items.feed_ranking.signals import SEEKS_SIDE, ReaderContext
from items.models import Agent, BroadcastType, FeedDelivery, ItemStats
from items.search import semantic_candidates
from items.selectors import visible_items


def nearest_ids(context: ReaderContext, *, broadcast_type: str | None, domain: str | None) -> set[int]:
    """Nearest items to the seeks vector among supply/info/alert items and to the offers vector among demands
    (each type walks its own HNSW graph), plus demands near the seeks when the reader offers nothing."""
    found: set[int] = set()
    depth = settings.FEED_CANDIDATES_NEAREST
    for kind in BroadcastType.values:
        if broadcast_type and kind != broadcast_type:
            continue
        vector = context.seeks if kind in SEEKS_SIDE or context.offers is None else context.offers
        if vector is None:
            continue
        rows = semantic_candidates(
            embedding=vector.tolist(), min_similarity=-1.0, broadcast_type=kind, domain=domain, depth=depth
        )
        found.update(pk for pk, _ in rows)
    # Each clause of a profile with several wants, over all types (the general graph): one query per clause.
    for part in [*context.seeks_parts[1:], *context.offers_parts[1:]]:
        rows = semantic_candidates(
            embedding=part.tolist(), min_similarity=-1.0, broadcast_type=broadcast_type, domain=domain, depth=depth
        )
        found.update(pk for pk, _ in rows)
    return found


def recent_ids(reader: Agent, *, broadcast_type: str | None, domain: str | None) -> set[int]:
    queryset = visible_items(broadcast_type, domain).exclude(author=reader).order_by("-pk")
    return set(queryset.values_list("pk", flat=True)[: settings.FEED_CANDIDATES_RECENT])


def neighbour_ids(context: ReaderContext) -> set[int]:
    best = sorted(context.neighbour_likes, key=context.neighbour_likes.__getitem__, reverse=True)
    return set(best[: settings.FEED_CANDIDATES_NEIGHBOURS])


def trending_ids(*, now: datetime) -> set[int]:
    """The most engaged of the recently updated counters (the index on updated_at bounds the read)."""
    count = settings.FEED_CANDIDATES_TRENDING
    if count <= 0:
        return set()
    since = now - timedelta(hours=3 * settings.FEED_TRENDING_HALF_LIFE_HOURS)
    rows = (
        ItemStats.objects.filter(updated_at__gte=since)
        .order_by("-updated_at")
        .values_list("item_id", "score_one", "score_two", "score_minus_one", "consumed")[: count * 5]
    )
    weight = settings.FEED_TRENDING_CONSUMED_WEIGHT

    def engagement(row: tuple) -> float:
        return row[1] + 2 * row[2] - row[3] + weight * row[4]

    return {row[0] for row in sorted(rows, key=engagement, reverse=True)[:count] if engagement(row) > 0}


def servable_ids(
    reader: Agent, ids: set[int], *, broadcast_type: str | None, domain: str | None, seen_since: datetime | None
) -> list[int]:
    """Of `ids`, each one's group stood for by its newest visible member not written by the reader, leaving out
    the groups served to the reader since `seen_since` (the unseen feed's seen memory; None: no memory). Three
    index-backed reads (by primary key, by group, by the reader's deliveries), each bounded by the candidates."""
    if not ids:
        return []
    visible = visible_items(broadcast_type, domain).exclude(author=reader)
    group_key = Coalesce("group_id", "pk", output_field=BigIntegerField())
    keys = set(visible.filter(pk__in=ids).annotate(group_key=group_key).values_list("group_key", flat=True))
    newest: dict[int, int] = {}
    members = visible.filter(group_id__in=keys).values_list("group_id", "pk")
    ungrouped = visible.filter(pk__in=keys, group_id__isnull=True).values_list("pk", "pk")
    for group, pk in [*members, *ungrouped]:
        newest[group] = max(pk, newest.get(group, 0))
    if seen_since is not None:
        seen = FeedDelivery.objects.filter(agent=reader, group_id__in=keys, delivered_at__gte=seen_since)
        for group in seen.values_list("group_id", flat=True):
            newest.pop(group, None)
    return sorted(newest.values(), reverse=True)
