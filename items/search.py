"""Search over completed items: keyword (full text), semantic (embeddings) and hybrid (both, fused).

Relevance comes before ranking: keyword mode returns only items whose search vector matches the query;
semantic mode answers only when the query's nearest item reaches the floor calibrated for the embedding model
(SEARCH_MIN_SIMILARITY), and then returns the items down to the model's lower tail floor (SEARCH_TAIL_SIMILARITY:
answers in another language sit lower); hybrid fuses, by reciprocal rank, only candidates that cleared their own mode's
bar. So a query that matches nothing returns nothing in every mode.

Cost is bounded as the network grows: keyword ranking (items.keyword_search: ts_rank_cd on the stored, weighted
vector) looks at the SEARCH_KEYWORD_CANDIDATES most recent matches at most, within SEARCH_KEYWORD_BUDGET_MS;
semantic search (items.semantic_search) walks the HNSW index with an ef_search sized to the page; with a filter it
searches a selective filtered set exactly (bounded by EXACT_MAX_ROWS), or walks (a type's own partial index for a
type filter) deeper in proportion to the filter's selectivity, at most pgvector's 1000 (pgvector 0.6 has no
iterative index scan).

In hybrid mode the two legs run side by side: the semantic one (query embedding, then the nearest-neighbour
query) on a second database connection in a small per-process thread pool, while the request's thread runs
the keyword one, so a hybrid search costs about its slower leg instead of the sum of both. They run one after
the other when a second connection would not see what the first sees (inside a transaction, as in most
tests), when the database pool has no spare connection, or when SEARCH_PARALLEL_LEGS slots are all taken.

Query embeddings come from the model layer in `pipeline`, which `items` must not import: the pipeline app
connects its embedder to items.ports when Django starts (pipeline.apps).
"""

from __future__ import annotations

import functools
import hashlib
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, TypeVar

from django.conf import settings
from django.db import close_old_connections, connections
from prometheus_client import Counter

from eigenflux.base import tracing
from eigenflux.base.dbpool import connection_to_spare
from items import ports
from items.keyword_search import KeywordMatches, keyword_candidates
from items.models import ProcessedItem
from items.ports import QueryEmbedder, QueryVector, SemanticSearchUnavailable
from items.selectors import with_raw
from items.semantic_search import semantic_candidates

MODES = ("keyword", "semantic", "hybrid")
RRF_K = 60  # reciprocal rank fusion's constant: 1 / (k + rank)

HYBRID_LEGS = Counter(
    "eigenflux_search_hybrid_legs_total",
    "Hybrid searches by how their keyword and semantic legs ran: side by side or one after the other.",
    ["run"],
)
T = TypeVar("T")
U = TypeVar("U")


def embed_query(text: str) -> QueryVector:
    embedder = ports.connected().query_embedder
    if embedder is None:
        raise SemanticSearchUnavailable("no query embedder is connected (items.ports)")
    return embedder(text)


@dataclass
class SearchHit:
    item: ProcessedItem
    score: float  # what the results are ordered by in this mode
    keyword_score: float | None = None  # ts_rank_cd, normalised to [0, 1)
    semantic_score: float | None = None  # cosine similarity

    @property
    def matched(self) -> list[str]:
        return [
            mode
            for mode, score in (("keyword", self.keyword_score), ("semantic", self.semantic_score))
            if score is not None
        ]


@dataclass(frozen=True)
class SearchPage:
    hits: list[SearchHit]
    has_more: bool
    offset: int = 0
    fingerprint: str = field(default="", repr=False)
    partial: bool = False  # the keyword leg ran out of its budget (KeywordMatches)


def fingerprint(*, q: str, mode: str, broadcast_type: str | None, domain: str | None) -> str:
    """Identifies a search, so a cursor is only accepted by the search that issued it."""
    key = "\x1f".join((q, mode, broadcast_type or "", domain or ""))
    return hashlib.blake2b(key.encode("utf-8"), digest_size=6).hexdigest()


def search_items(
    *,
    q: str,
    mode: str,
    broadcast_type: str | None,
    domain: str | None,
    offset: int,
    limit: int,
    embed: QueryEmbedder | None = None,
) -> SearchPage:
    """One page of results, best first. `embed` turns the query into its vector (default: the registered
    embedder, uncached; the API passes items.query_embeddings' cached, rate-limited one) and is called only
    in semantic and hybrid mode. Raises SemanticSearchUnavailable when it cannot embed the query."""
    if mode not in MODES:
        raise ValueError(f"unknown search mode {mode!r}; expected one of {', '.join(MODES)}")
    cap = int(settings.SEARCH_MAX_RESULTS)
    end = min(offset + limit, cap)
    depth = min(end + 1, cap)  # one more than the page, to know whether there is more
    filters: dict[str, Any] = {"broadcast_type": broadcast_type, "domain": domain}
    keyword = KeywordMatches([])
    semantic: list[tuple[int, float]] = []

    def keyword_leg() -> KeywordMatches:
        return keyword_candidates(q=q, depth=depth, **filters)

    def semantic_leg() -> list[tuple[int, float]]:
        vector = (embed or embed_query)(q)
        floor, tail = similarity_floors(vector)
        return semantic_candidates(
            embedding=vector.values, min_similarity=floor, tail_similarity=tail, depth=depth, **filters
        )

    if offset < end:
        if mode == "hybrid":
            keyword, semantic = both_legs(keyword_leg, semantic_leg)
        elif mode == "keyword":
            keyword = keyword_leg()
        else:
            semantic = semantic_leg()
    if mode == "hybrid":
        ranked = fuse(keyword.ranked, semantic)
    elif mode == "keyword":
        ranked = [SearchHitScores(pk, score, score, None) for pk, score in keyword.ranked]
    else:
        ranked = [SearchHitScores(pk, score, None, score) for pk, score in semantic]
    return SearchPage(
        hits=_hits(ranked[offset:end]),
        has_more=len(ranked) > end and end < cap,
        offset=offset,
        fingerprint=fingerprint(q=q, mode=mode, broadcast_type=broadcast_type, domain=domain),
        partial=keyword.partial,
    )


def _hits(page: list[SearchHitScores]) -> list[SearchHit]:
    """The page's items loaded, in its order (one that went away meanwhile is left out)."""
    items = {item.pk: item for item in with_raw(ProcessedItem.objects.filter(pk__in=[row.pk for row in page]))}
    return [
        SearchHit(item=items[row.pk], score=row.score, keyword_score=row.keyword, semantic_score=row.semantic)
        for row in page
        if row.pk in items
    ]


@dataclass
class _SecondLegs:
    """Where second legs run: SEARCH_PARALLEL_LEGS threads, and as many slots so that none waits in a queue."""

    size: int
    slots: threading.BoundedSemaphore
    executor: ThreadPoolExecutor


_legs_lock = threading.Lock()
_second_legs: _SecondLegs | None = None


def both_legs(first: Callable[[], T], second: Callable[[], U]) -> tuple[T, U]:
    """Run `second` on a pool thread (its own database connection) while this thread runs `first`, when that is
    safe and a slot is free; otherwise one after the other. Either leg's exception reaches the caller, and
    `second` has always finished when this returns."""
    legs = _second_legs_pool()
    if legs is None or not _spare_connection() or not legs.slots.acquire(blocking=False):
        HYBRID_LEGS.labels("one_after_other").inc()
        return first(), second()
    HYBRID_LEGS.labels("side_by_side").inc()
    try:
        # The pool thread keeps its own Django connection; only the trace context goes along. (The leg reads the
        # primary either way: semantic search runs in a transaction, which the replica router keeps there.)
        future = legs.executor.submit(tracing.carry_context(functools.partial(_on_own_connection, second)))
    except BaseException:
        legs.slots.release()
        raise
    future.add_done_callback(lambda _: legs.slots.release())
    try:
        result = first()
    except BaseException:
        wait([future])  # the second leg never outlives the request; the first leg's error is the one raised
        raise
    return result, future.result()


def _second_legs_pool() -> _SecondLegs | None:
    """This process's pool for second legs (rebuilt if the setting changed), or None when turned off."""
    global _second_legs
    size = int(settings.SEARCH_PARALLEL_LEGS)
    if size <= 0:
        return None
    with _legs_lock:
        if _second_legs is None or _second_legs.size != size:
            if _second_legs is not None:
                _second_legs.executor.shutdown(wait=False)
            executor = ThreadPoolExecutor(max_workers=size, thread_name_prefix="search-leg")
            _second_legs = _SecondLegs(size, threading.BoundedSemaphore(size), executor)
        return _second_legs


def _spare_connection() -> bool:
    """A second connection would see what this thread sees, and taking one will not wait for the pool.

    Inside a transaction (an atomic block, or a test's) another connection cannot see its rows. In a pooled
    process the second leg only takes a connection that is idle or that the pool can still open, never one it
    would have to wait for while this thread holds its own."""
    in_transaction = any(wrapper.in_atomic_block for wrapper in connections.all(initialized_only=True))
    return not in_transaction and connection_to_spare()


def _on_own_connection(leg: Callable[[], T]) -> T:
    """Run a leg on the pool thread's own connection (thread-local, as Django keeps them), then give it back:
    to the database pool when pooled; kept for the thread's next leg, up to CONN_MAX_AGE, otherwise."""
    try:
        return leg()
    finally:
        close_old_connections()


def similarity_floors(vector: QueryVector) -> tuple[float, float]:
    """(the floor the nearest item must reach for any answer, the floor of the items kept then): the settings when
    set, else the model's, which came with the vector. SEARCH_MIN_SIMILARITY set alone is a single cut (an operator
    who raised it asked for stricter results, not for a tail); the tail floor is never above the answer floor."""
    configured, configured_tail = settings.SEARCH_MIN_SIMILARITY, settings.SEARCH_TAIL_SIMILARITY
    if configured is None:
        floor, tail = vector.min_similarity, vector.tail_similarity
    else:
        floor, tail = float(configured), None
    if configured_tail is not None:
        tail = float(configured_tail)
    return floor, floor if tail is None else min(tail, floor)


@dataclass(frozen=True)
class SearchHitScores:
    pk: int
    score: float
    keyword: float | None
    semantic: float | None


def fuse(keyword: list[tuple[int, float]], semantic: list[tuple[int, float]]) -> list[SearchHitScores]:
    """Reciprocal rank fusion of two rankings that each cleared their own bar: items high in either rise,
    items in both rise most; ties go to the newer item."""
    fused: dict[int, float] = {}
    for ranking in (keyword, semantic):
        for rank, (pk, _score) in enumerate(ranking, start=1):
            fused[pk] = fused.get(pk, 0.0) + 1.0 / (RRF_K + rank)
    keyword_scores, semantic_scores = dict(keyword), dict(semantic)
    ordered = sorted(fused, key=lambda pk: (-fused[pk], -pk))
    return [SearchHitScores(pk, fused[pk], keyword_scores.get(pk), semantic_scores.get(pk)) for pk in ordered]
