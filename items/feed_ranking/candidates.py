"""The feed's candidates (docs/feed.md#candidates): a few bounded, index-backed sources merged, then narrowed to
what the reader may be served (visible, not its own, one per similarity group, not already served).

The sources are sub-selects of one UNION ALL (the nearest items per HNSW graph under one `SET LOCAL
hnsw.ef_search`, the recent window, trending, the similar readers' likes), each yielding what the narrowing
reads, so the narrowing and the facts of each survivor (context.servable_facts) are the same statement: one round
trip per ranking."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import numpy as np
from django.conf import settings

from eigenflux.base.embedding_space import configured_embedding_model
from items.feed_ranking.signals import SEEKS_SIDE, ReaderContext
from items.models import BroadcastType, ItemStats, ItemStatus, ProcessedItem, graph_key_sql, graph_query_sql
from items.search import semantic_candidates

ITEMS = ProcessedItem._meta.db_table
STATS = ItemStats._meta.db_table
# Visible as items.selectors.visible_items says: completed and not expired (the caller binds `now`).
VISIBLE_SQL = f"p.status = '{ItemStatus.COMPLETED}' AND (p.expire_time IS NULL OR p.expire_time > %(now)s)"


def type_and_domain(broadcast_type: str | None, domain: str | None) -> str:
    """The feed's filters as SQL over `p` (parameters `kind` and `domain`)."""
    kind = " AND p.broadcast_type = %(kind)s" if broadcast_type else ""
    return kind + (" AND p.domains @> ARRAY[%(domain)s]::varchar(100)[]" if domain else "")


def vector_text(vector: np.ndarray) -> str:
    """A vector as pgvector's text input (6 significant digits: what float4 keeps)."""
    return "[" + ",".join(f"{x:.6g}" for x in vector.tolist()) + "]"


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


# What each source yields: the item, its group key, and what the narrowing filters read (no second visit).
SOURCE_COLUMNS = "p.raw_id, COALESCE(p.group_id, p.raw_id) AS g, p.author_id, p.status, p.expire_time, "
SOURCE_COLUMNS += "p.broadcast_type, p.domains"


def _nearest_sql(walks: list, params: dict[str, Any]) -> list[str]:
    parts: list[str] = []
    texts: dict[int, str] = {}  # the seeks vector walks three graphs: written once
    for number, (kind, vector) in enumerate(walks):
        kind_sql = f"AND p.broadcast_type = %(walk_kind_{number})s " if kind else ""
        walk = graph_key_sql("p.embedding") + " <=> " + graph_query_sql(f"%(walk_{number})s")  # the graphs' key
        parts.append(
            f"(SELECT {SOURCE_COLUMNS} FROM {ITEMS} p WHERE p.embedding IS NOT NULL {kind_sql}AND {VISIBLE_SQL} "  # noqa: S608
            "AND p.embedding_model = %(embedding_model)s "
            f"ORDER BY {walk} LIMIT %(nearest)s)"
        )
        params[f"walk_kind_{number}"] = kind
        if id(vector) not in texts:
            texts[id(vector)] = vector_text(vector)
        params[f"walk_{number}"] = texts[id(vector)]
    params["nearest"] = settings.FEED_CANDIDATES_NEAREST
    params["embedding_model"] = configured_embedding_model()  # never a walk through another model's vectors
    return parts


def _recent_sql(broadcast_type: str | None, domain: str | None, params: dict[str, Any]) -> str:
    params["recent"] = settings.FEED_CANDIDATES_RECENT
    return (
        f"(SELECT {SOURCE_COLUMNS} FROM {ITEMS} p WHERE {VISIBLE_SQL} AND p.author_id <> %(reader)s"  # noqa: S608
        f"{type_and_domain(broadcast_type, domain)} ORDER BY p.raw_id DESC LIMIT %(recent)s)"
    )


def _trending_sql(now: datetime, params: dict[str, Any]) -> str | None:
    """The most engaged of the recently updated counters (the index on updated_at bounds the read)."""
    count = settings.FEED_CANDIDATES_TRENDING
    if count <= 0:
        return None
    params.update(
        trending_consumed=settings.FEED_TRENDING_CONSUMED_WEIGHT,
        trending_since=now - timedelta(hours=3 * settings.FEED_TRENDING_HALF_LIFE_HOURS),
        trending_scan=count * 5,
        trending=count,
    )
    return (
        f"(SELECT {SOURCE_COLUMNS} FROM (SELECT item_id, score_one + 2 * score_two - score_minus_one "  # noqa: S608
        f"+ %(trending_consumed)s * consumed AS e FROM {STATS} WHERE updated_at >= %(trending_since)s "
        f"ORDER BY updated_at DESC LIMIT %(trending_scan)s) s JOIN {ITEMS} p ON p.raw_id = s.item_id "
        "WHERE s.e > 0 ORDER BY s.e DESC LIMIT %(trending)s)"
    )


def candidate_sources(
    context: ReaderContext, *, broadcast_type: str | None, domain: str | None, now: datetime, params: dict[str, Any]
) -> str:
    """Every source's candidates as one UNION ALL of bounded sub-selects (each yielding SOURCE_COLUMNS), adding
    their parameters to `params`: the nearest items per walk, the recent window, trending, and the items found
    beforehand (the similar readers' likes from the reader's context; with a domain filter, the walks)."""
    params.setdefault("now", now)
    parts = [] if domain else _nearest_sql(_nearest_plan(context, broadcast_type), params)
    parts.append(_recent_sql(broadcast_type, domain, params))
    if (trending := _trending_sql(now, params)) is not None:
        parts.append(trending)
    found: set[int] = set()
    if domain:
        found |= _nearest_by_domain(context, broadcast_type=broadcast_type, domain=domain)
    best = sorted(context.neighbour_likes, key=context.neighbour_likes.__getitem__, reverse=True)
    found |= set(best[: settings.FEED_CANDIDATES_NEIGHBOURS])
    if found:
        parts.append(f"(SELECT {SOURCE_COLUMNS} FROM {ITEMS} p WHERE p.raw_id = ANY(%(found)s))")  # noqa: S608
        params["found"] = sorted(found)
    return " UNION ALL ".join(parts)


def hnsw_ef_search(cursor) -> None:
    """Each walk keeps ef_search candidates; a few more than it returns leave room for the expired ones (for the
    transaction the cursor is in)."""
    ef_search = max(40, settings.FEED_CANDIDATES_NEAREST + settings.FEED_HNSW_EF_MARGIN)
    cursor.execute("SELECT set_config('hnsw.ef_search', %s, true)", [str(ef_search)])
