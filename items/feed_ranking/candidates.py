"""The feed's candidates (docs/feed.md#candidates): a few bounded, index-backed sources merged, then narrowed to
what the reader may be served (visible, not its own, one per similarity group, not already served).

Two round trips per ranking: one query gathers every source (each a bounded sub-select of a UNION ALL: the
nearest items per HNSW graph under one `SET LOCAL hnsw.ef_search`, the recent window, trending), and one narrows
them and loads each survivor's facts (context.item_facts)."""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np
from django.conf import settings
from django.db import connection, transaction

from items.feed_ranking.signals import SEEKS_SIDE, ReaderContext
from items.models import Agent, BroadcastType, ItemStats, ItemStatus, ProcessedItem
from items.search import semantic_candidates

ITEMS = ProcessedItem._meta.db_table
STATS = ItemStats._meta.db_table
# Visible as items.selectors.visible_items says: completed and not expired (the caller binds `now`).
VISIBLE_SQL = f"p.status = '{ItemStatus.COMPLETED}' AND (p.expire_time IS NULL OR p.expire_time > %s)"


def _vector(vector) -> str:
    return "[" + ",".join(f"{float(x):.6g}" for x in vector) + "]"


def _nearest_plan(context: ReaderContext, broadcast_type: str | None) -> list[tuple[str | None, np.ndarray]]:
    """(broadcast type or None for the general graph, vector) per nearest-neighbour walk: the seeks vector in the
    supply/info/alert graphs, the offers vector in the demand graph (the seeks when the reader offers nothing),
    and each clause of a profile with several wants (over all types, or the asked type's graph)."""
    walks: list[tuple[str | None, np.ndarray]] = []
    for kind in BroadcastType.values:
        if broadcast_type and kind != broadcast_type:
            continue
        vector = context.seeks if kind in SEEKS_SIDE or context.offers is None else context.offers
        if vector is not None:
            walks.append((kind, vector))
    walks += [(broadcast_type, part) for part in [*context.seeks_parts[1:], *context.offers_parts[1:]]]
    return walks


def _nearest_by_domain(context: ReaderContext, *, broadcast_type: str | None, domain: str) -> set[int]:
    """With a domain filter the walks need items.search's planning (exact scan of a small filtered set, or a
    deeper walk): one search per walk."""
    found: set[int] = set()
    for kind, vector in _nearest_plan(context, broadcast_type):
        rows = semantic_candidates(
            embedding=vector.tolist(),
            min_similarity=-1.0,
            broadcast_type=kind,
            domain=domain,
            depth=settings.FEED_CANDIDATES_NEAREST,
        )
        found.update(pk for pk, _ in rows)
    return found


def _nearest_sql(walks: list, *, now: datetime) -> tuple[list[str], list]:
    parts: list[str] = []
    params: list = []
    for kind, vector in walks:
        kind_sql = "AND p.broadcast_type = %s " if kind else ""
        parts.append(
            f"(SELECT p.raw_id FROM {ITEMS} p WHERE p.embedding IS NOT NULL {kind_sql}AND {VISIBLE_SQL} "  # noqa: S608
            "ORDER BY p.embedding <=> %s::vector LIMIT %s)"
        )
        params += [*([kind] if kind else []), now, _vector(vector), settings.FEED_CANDIDATES_NEAREST]
    return parts, params


def _recent_sql(reader: Agent, *, broadcast_type: str | None, domain: str | None, now: datetime) -> tuple[str, list]:
    filters, params = "", [now, reader.pk]
    if broadcast_type:
        filters += " AND p.broadcast_type = %s"
        params.append(broadcast_type)
    if domain:
        filters += " AND p.domains @> ARRAY[%s]::varchar(100)[]"
        params.append(domain)
    params.append(settings.FEED_CANDIDATES_RECENT)
    sql = (
        f"(SELECT p.raw_id FROM {ITEMS} p WHERE {VISIBLE_SQL} AND p.author_id <> %s{filters} "  # noqa: S608
        "ORDER BY p.raw_id DESC LIMIT %s)"
    )
    return sql, params


def _trending_sql(*, now: datetime) -> tuple[str, list] | None:
    """The most engaged of the recently updated counters (the index on updated_at bounds the read)."""
    count = settings.FEED_CANDIDATES_TRENDING
    if count <= 0:
        return None
    since = now - timedelta(hours=3 * settings.FEED_TRENDING_HALF_LIFE_HOURS)
    sql = (
        "(SELECT item_id FROM (SELECT item_id, score_one + 2 * score_two - score_minus_one + %s * consumed AS e "  # noqa: S608
        f"FROM {STATS} WHERE updated_at >= %s ORDER BY updated_at DESC LIMIT %s) s "
        "WHERE e > 0 ORDER BY e DESC LIMIT %s)"
    )
    return sql, [settings.FEED_TRENDING_CONSUMED_WEIGHT, since, count * 5, count]


def candidate_ids(
    context: ReaderContext, reader: Agent, *, broadcast_type: str | None, domain: str | None, now: datetime
) -> set[int]:
    """Every source's candidates in one query (a UNION ALL of bounded sub-selects), plus the items similar
    readers scored well (already in the reader's context)."""
    walks = _nearest_plan(context, broadcast_type)
    parts: list[str] = []
    params: list = []
    if not domain:
        parts, params = _nearest_sql(walks, now=now)
    recent, recent_params = _recent_sql(reader, broadcast_type=broadcast_type, domain=domain, now=now)
    parts.append(recent)
    params += recent_params
    if (trending := _trending_sql(now=now)) is not None:
        parts.append(trending[0])
        params += trending[1]
    with transaction.atomic(), connection.cursor() as cursor:
        # Each walk keeps ef_search candidates; a few more than it returns leave room for the expired ones.
        ef_search = max(40, settings.FEED_CANDIDATES_NEAREST + settings.FEED_HNSW_EF_MARGIN)
        cursor.execute("SELECT set_config('hnsw.ef_search', %s, true)", [str(ef_search)])
        cursor.execute(" UNION ALL ".join(parts), params)
        found = {row[0] for row in cursor.fetchall()}
    if domain:
        found |= _nearest_by_domain(context, broadcast_type=broadcast_type, domain=domain)
    best = sorted(context.neighbour_likes, key=context.neighbour_likes.__getitem__, reverse=True)
    return found | set(best[: settings.FEED_CANDIDATES_NEIGHBOURS])
