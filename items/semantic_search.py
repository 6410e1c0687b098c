"""Semantic search's nearest-neighbour query (items.search), with or without filters (type, domain, language,
items written since a time), on the path the table's statistics choose: an HNSW walk of the main graph, of a
type's own graph (a partial index), an iterative walk that goes on until enough rows pass the filter (pgvector
0.8 and later), or an exact search of the filtered rows (docs/search.md, "Filtered semantic search")."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import connection, transaction
from pgvector.django import CosineDistance
from prometheus_client import Counter

from eigenflux.base.embedding_space import configured_embedding_model
from items.models import ProcessedItem, graph_key
from items.selectors import visible_items

HNSW_MAX_EF_SEARCH = 1000  # pgvector's upper bound for hnsw.ef_search
# Up to this many (estimated) rows, a filtered semantic search is exact: a scan costs a few milliseconds.
EXACT_SCAN_ROWS = 5000
# A filtered set a walk cannot serve (it would need more than HNSW_MAX_EF_SEARCH, or came back short) is searched
# exactly up to this many (estimated) rows: about 5 µs of PostgreSQL CPU per row (each vector is read from TOAST).
EXACT_MAX_ROWS = 20000
# HNSW candidates walked per result wanted from a filtered walk, over the share of the graph the filter keeps
# (bench/hnsw_recall.py --filtered measures the recall each value buys).
FILTER_EF_FACTOR = 50
# pgvector 0.8's iterative index scans: a filtered walk goes on past ef_search until LIMIT rows pass the filter, in
# strict distance order, visiting at most this many tuples. pgvector's own default, 20,000, cost a search filtered
# by a domain the query's neighbourhood lacks 90-184 ms of PostgreSQL CPU at 1M items for no recall; a filter
# spread evenly needs about depth / share tuples (700 for 20 results at 3 %).
ITERATIVE_SCAN_VERSION = (0, 8, 0)
ITERATIVE_MAX_SCAN_TUPLES = 5000
SEMANTIC_PATHS = Counter(
    "eigenflux_search_semantic_paths_total",
    "Semantic searches by path: an HNSW walk, an iterative walk (pgvector 0.8), an exact search of the filtered "
    "rows, or an exact search after a filtered walk came back short.",
    ["path"],
)


@dataclass(frozen=True)
class SemanticFilters:
    """What a semantic search keeps: a broadcast type, a domain, a language, items written since a time."""

    broadcast_type: str | None = None
    domain: str | None = None
    lang: str | None = None
    since: datetime | None = None

    def __bool__(self) -> bool:
        return any((self.broadcast_type, self.domain, self.lang, self.since))

    def queryset(self):
        queryset = visible_items(self.broadcast_type, self.domain)
        if self.lang:
            queryset = queryset.filter(lang=self.lang)
        if self.since:
            queryset = queryset.filter(created_at__gte=self.since)
        return queryset


@dataclass(frozen=True)
class SemanticPlan:
    """How a semantic search runs: an exact search of the filtered rows, or an HNSW walk at `ef_search` of the
    graph holding `graph` rows (a type's own, or the main one), of which about `matching` pass the filter (both
    0 when nothing is filtered: no statistics are read); `iterative`: the walk goes on until enough rows pass."""

    exact: bool
    ef_search: int
    matching: float
    graph: float
    iterative: bool = False


def semantic_plan(filters: SemanticFilters, depth: int) -> SemanticPlan:
    """The path, from the planner's statistics (an EXPLAIN row estimate and the graphs' reltuples, no count).

    A walk keeps `SEARCH_HNSW_EF_SEARCH` candidates (at least twice the page). A filter keeping a share s of the
    graph's rows leaves about s of a walk's candidates, so a filtered walk wants FILTER_EF_FACTOR * depth / s
    (at most pgvector's 1000). A small filtered set (EXACT_SCAN_ROWS), or one that would want more than 1000 and
    is at most EXACT_MAX_ROWS, is searched exactly: an ORDER BY distance over the filtered rows, found through
    their index. Otherwise it walks; with pgvector 0.8 or later the walk is iterative (it goes on past its
    candidates until LIMIT rows pass the filter, visiting at most ITERATIVE_MAX_SCAN_TUPLES), before 0.8 its
    cost stays bounded and its recall may fall short."""
    iterative = iterative_scans()
    breadth = min(HNSW_MAX_EF_SEARCH, max(depth * 2, settings.SEARCH_HNSW_EF_SEARCH))
    if not filters:  # no statistics needed: nothing is filtered out of the walk
        return SemanticPlan(False, breadth, 0.0, 0.0, iterative)
    matching = _estimated_rows(filters.queryset())
    graph = _graph_rows(filters.broadcast_type)
    share = min(1.0, matching / max(graph, 1.0))
    wanted = math.ceil(FILTER_EF_FACTOR * depth / share) if share > 0 else HNSW_MAX_EF_SEARCH + 1
    if matching <= EXACT_SCAN_ROWS or (wanted > HNSW_MAX_EF_SEARCH and matching <= EXACT_MAX_ROWS):
        return SemanticPlan(True, 0, matching, graph)
    return SemanticPlan(False, min(HNSW_MAX_EF_SEARCH, max(breadth, wanted)), matching, graph, iterative)


def semantic_candidates(
    *,
    embedding: list[float],
    min_similarity: float,
    broadcast_type: str | None,
    domain: str | None,
    depth: int,
    lang: str | None = None,
    since: datetime | None = None,
    tail_similarity: float | None = None,
) -> list[tuple[int, float]]:
    """Nearest items by cosine similarity, best first, on the path semantic_plan chooses: none when the nearest is
    below `min_similarity`, else every one down to `tail_similarity` (None: the same floor; never above it).
    A walk that comes back short while its farthest item clears the floor ran out of candidates before the
    relevant items did (a filter rarer near the query than overall, or expired items in the way): an iterative
    walk reached its bound, an older walk walks again at the widest ef_search; a filtered search still short is
    done exactly when its filtered set is at most EXACT_MAX_ROWS (otherwise what the walk found is the answer: the
    cost stays bounded)."""
    filters = SemanticFilters(broadcast_type, domain, lang, since)
    floor = min_similarity
    min_similarity = floor if tail_similarity is None else min(tail_similarity, floor)  # what a row needs
    with transaction.atomic():
        plan = semantic_plan(filters, depth)
        if plan.exact:
            SEMANTIC_PATHS.labels("exact").inc()
            return _answer(_exact(embedding, filters, depth, min_similarity), floor, min_similarity)
        SEMANTIC_PATHS.labels("iterative_walk" if plan.iterative else "walk").inc()
        if filters:
            # Otherwise the planner tends to fetch every filtered row and sort it by distance: hundreds of
            # milliseconds over tens of thousands of rows.
            _set_local("enable_sort", "off")
        if plan.iterative:
            _set_local("hnsw.iterative_scan", "strict_order")
            _set_local("hnsw.max_scan_tuples", ITERATIVE_MAX_SCAN_TUPLES)
        rows = _walk(embedding, filters, depth, plan.ef_search)
        if _short(rows, depth, min_similarity) and plan.ef_search < HNSW_MAX_EF_SEARCH and not plan.iterative:
            SEMANTIC_PATHS.labels("widest_walk").inc()
            rows = _walk(embedding, filters, depth, HNSW_MAX_EF_SEARCH)
        if _short(rows, depth, min_similarity) and filters and plan.matching <= EXACT_MAX_ROWS:
            SEMANTIC_PATHS.labels("exact_after_walks").inc()
            rows = _exact(embedding, filters, depth, min_similarity)
    return _answer(rows, floor, min_similarity)


def iterative_scans() -> bool:
    """Whether the database's pgvector has iterative index scans (0.8.0 and later), read once per connection."""
    known = getattr(connection, "_eigenflux_iterative_scans", None)
    if known is None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
            row = cursor.fetchone()
        version = tuple(int(part) for part in row[0].split(".")[:3] if part.isdigit()) if row else ()
        known = version >= ITERATIVE_SCAN_VERSION
        connection._eigenflux_iterative_scans = known  # type: ignore[attr-defined]
    return known


def _answer(rows: list[tuple[int, float]], floor: float, tail: float) -> list[tuple[int, float]]:
    """Nothing when the nearest row is below `floor` (the query has no answer), else the rows down to `tail`."""
    if not rows or rows[0][1] < floor:
        return []
    return [(pk, similarity) for pk, similarity in rows if similarity >= tail]


def _walk(embedding: list[float], filters: SemanticFilters, depth: int, ef_search: int) -> list[tuple[int, float]]:
    _set_local("hnsw.ef_search", ef_search)
    return _nearest(embedding, filters, depth)


def _exact(embedding: list[float], filters: SemanticFilters, depth: int, min_similarity: float):
    """Every filtered row's distance, no HNSW index (index scans off for the rest of the transaction: the filter's
    btree or GIN index is read by a bitmap scan)."""
    _set_local("enable_indexscan", "off")
    _set_local("enable_sort", "on")  # a walk before it may have turned sorting off
    return _nearest(embedding, filters, depth, min_similarity=min_similarity)


def _short(rows: list[tuple[int, float]], depth: int, min_similarity: float) -> bool:
    """Fewer rows than asked while the farthest still clears the floor: the walk's candidates ran out before
    the relevant items did."""
    return len(rows) < depth and (not rows or rows[-1][1] >= min_similarity)


def _nearest(
    embedding: list[float], filters: SemanticFilters, depth: int, *, min_similarity: float | None = None
) -> list[tuple[int, float]]:
    """The `depth` nearest filtered rows, best first, each with its similarity at full precision. A walk
    (`min_similarity` None) orders by the graphs' half-precision key, so a graph serves it; an exact search orders
    by the full-precision distance itself."""
    distance = CosineDistance("embedding", embedding)
    # Only the configured model's vectors: during a re-embed the others are not comparable with the query's. The
    # filter is checked on the rows the HNSW walk yields (the plan stays an index scan; tests/pipeline/test_reembed.py).
    queryset = filters.queryset().filter(embedding__isnull=False, embedding_model=configured_embedding_model())
    queryset = queryset.annotate(distance=distance)
    if min_similarity is not None:
        queryset = queryset.filter(distance__lte=1.0 - min_similarity)
        order = queryset.order_by("distance")
    else:
        order = queryset.order_by(CosineDistance(graph_key(), embedding))
    rows = [(pk, 1.0 - float(distance)) for pk, distance in order.values_list("pk", "distance")[:depth]]
    # Half precision may order two rows whose cosines differ by less than its rounding (about 1e-5) the other way;
    # the answer reads in full precision's order.
    return sorted(rows, key=lambda row: -row[1])


def _graph_rows(broadcast_type: str | None) -> float:
    """The rows of the HNSW graph a walk meets: the type's own partial index, or the main one (pg_class.reltuples,
    kept by VACUUM and ANALYZE; every item with a vector, expired or unfinished ones too)."""
    name = f"processed_hnsw_{broadcast_type}" if broadcast_type else "processed_embedding_hnsw"
    with connection.cursor() as cursor:
        cursor.execute("SELECT reltuples FROM pg_class WHERE relname = %s", [name])
        row = cursor.fetchone()
    if row is None or row[0] < 0:  # no such index, or never vacuumed or analyzed
        return _estimated_items()
    return float(row[0])


def _estimated_rows(queryset) -> float:
    """The planner's estimate of a queryset's rows, from the table's statistics (EXPLAIN, no count)."""
    plan = json.loads(queryset.values("pk").explain(format="json"))
    return float(plan[0]["Plan"]["Plan Rows"])


def _estimated_items() -> float:
    """The planner's own estimate of the table's rows (pg_class.reltuples, kept by autovacuum): no count."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT reltuples FROM pg_class WHERE oid = %s::regclass", [ProcessedItem._meta.db_table])
        row = cursor.fetchone()
    return float(row[0]) if row else 0.0


def _set_local(name: str, value: object) -> None:
    """A setting for the current transaction only (SET LOCAL, which takes no bind parameters)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT set_config(%s, %s, true)", [name, str(value)])
