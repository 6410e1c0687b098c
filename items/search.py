"""Search over completed items: keyword (full text), semantic (embeddings) and hybrid (both, fused).

Relevance comes before ranking: keyword mode returns only items whose search vector matches the query;
semantic mode answers only when the query's nearest item reaches the floor calibrated for the embedding model
(SEARCH_MIN_SIMILARITY), and then returns the items down to the model's lower tail floor (SEARCH_TAIL_SIMILARITY:
answers in another language sit lower); hybrid fuses, by reciprocal rank, only candidates that cleared their own mode's
bar. So a query that matches nothing returns nothing in every mode.

Cost is bounded as the network grows: keyword ranking (ts_rank_cd on the stored, weighted vector) looks at
the SEARCH_KEYWORD_CANDIDATES most recent matches at most; semantic search (items.semantic_search) walks the
HNSW index with an ef_search sized to the page; with a filter it searches a selective filtered set exactly
(bounded by EXACT_MAX_ROWS), or walks (a type's own partial index for a type filter) deeper in proportion to
the filter's selectivity, at most pgvector's 1000 (pgvector 0.6 has no iterative index scan).

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
from django.contrib.postgres.search import SearchRank, SearchVectorField
from django.db import close_old_connections, connection, connections, transaction
from django.db.models import BigIntegerField, ExpressionWrapper, F, Subquery, Value
from django.db.models.functions import Coalesce
from prometheus_client import Counter

from eigenflux.base import tracing
from eigenflux.base.dbpool import connection_to_spare
from items import ports, textsearch
from items.models import ProcessedItem
from items.ports import QueryEmbedder, QueryVector, SemanticSearchUnavailable
from items.selectors import visible_items, with_raw
from items.semantic_search import semantic_candidates

MODES = ("keyword", "semantic", "hybrid")
RRF_K = 60  # reciprocal rank fusion's constant: 1 / (k + rank)

KEYWORD_CANDIDATE_PATHS = Counter(
    "eigenflux_search_keyword_candidates_total",
    "Keyword searches by how their newest matches were found: within the window of the newest items (window), "
    "walking a few windows further (stretched), or through the text index over the whole network (text_index).",
    ["path"],
)
HYBRID_LEGS = Counter(
    "eigenflux_search_hybrid_legs_total",
    "Hybrid searches by how their keyword and semantic legs ran: side by side or one after the other.",
    ["run"],
)
T = TypeVar("T")


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
    keyword: list[tuple[int, float]] = []
    semantic: list[tuple[int, float]] = []

    def keyword_leg() -> list[tuple[int, float]]:
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
        ranked = fuse(keyword, semantic)
    elif mode == "keyword":
        ranked = [SearchHitScores(pk, score, score, None) for pk, score in keyword]
    else:
        ranked = [SearchHitScores(pk, score, None, score) for pk, score in semantic]
    page = ranked[offset:end]
    items = {item.pk: item for item in with_raw(ProcessedItem.objects.filter(pk__in=[row.pk for row in page]))}
    hits = [
        SearchHit(item=items[row.pk], score=row.score, keyword_score=row.keyword, semantic_score=row.semantic)
        for row in page
        if row.pk in items
    ]
    return SearchPage(
        hits=hits,
        has_more=len(ranked) > end and end < cap,
        offset=offset,
        fingerprint=fingerprint(q=q, mode=mode, broadcast_type=broadcast_type, domain=domain),
    )


@dataclass
class _SecondLegs:
    """Where second legs run: SEARCH_PARALLEL_LEGS threads, and as many slots so that none waits in a queue."""

    size: int
    slots: threading.BoundedSemaphore
    executor: ThreadPoolExecutor


_legs_lock = threading.Lock()
_second_legs: _SecondLegs | None = None


def both_legs(first: Callable[[], T], second: Callable[[], T]) -> tuple[T, T]:
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


def keyword_candidates(
    *, q: str, broadcast_type: str | None, domain: str | None, depth: int
) -> list[tuple[int, float]]:
    """Items that clear the keyword bar (items.textsearch), by ts_rank_cd over the stored weighted vector
    (keywords above summary above content), normalised to rank / (rank + 1). Only the most recent
    SEARCH_KEYWORD_CANDIDATES matches are ranked, so a query matching most of the network costs the same as
    one matching a few hundred items."""
    query = textsearch.keyword_query(q)
    if query is None:
        return []
    newest = _newest_in_window(query.match, broadcast_type, domain)
    if newest is not None:
        KEYWORD_CANDIDATE_PATHS.labels(newest[1]).inc()
        recent: Any = newest[0]
    else:
        KEYWORD_CANDIDATE_PATHS.labels("text_index").inc()
        recent = Subquery(_newest_matches(query.match, broadcast_type, domain))

    def rank_by(tsquery):
        return SearchRank(
            F("search_vector"), tsquery, weights=textsearch.RANK_WEIGHTS, normalization=Value(32), cover_density=True
        )

    # Each rank is in [0, 1); the mean of the two keeps keyword_score there, and an item written in the
    # query's own words ranks above one found only through the lexicon's translations.
    rank = rank_by(query.rank) if query.own is None else (rank_by(query.rank) + rank_by(query.own)) / 2
    rows = (
        ProcessedItem.objects.filter(pk__in=recent)
        .annotate(rank=rank)
        .order_by("-rank", "-pk")
        .values_list("pk", "rank")[:depth]
    )
    if newest is not None:
        return [(pk, float(score)) for pk, score in rows]
    with transaction.atomic():
        _bitmap_memory()
        return [(pk, float(score)) for pk, score in rows]


def _bitmap_memory() -> None:
    """Give this transaction's text index path SEARCH_KEYWORD_WORK_MEM_MB of work_mem. The path intersects the
    text index's bitmap of matches with a filter's (the domains index); a bitmap larger than work_mem goes lossy:
    it keeps whole pages instead of rows, and every row on such a page is read and tested again. At 1M items, with
    the server's default 4 MB, a `domain` search read 10,000 pages to test 100,000 rows and found none (300 ms);
    with 8 MB its bitmaps stayed exact and it read none (docs/scaling.md)."""
    megabytes = int(settings.SEARCH_KEYWORD_WORK_MEM_MB)
    if megabytes:
        with connection.cursor() as cursor:  # local: it ends with the transaction
            cursor.execute("SELECT set_config('work_mem', %s, true)", [f"{megabytes}MB"])


# How far past SEARCH_KEYWORD_WINDOW a walk goes on when the window held some matches but too few: up to this many
# windows, and only when the matches found so far say the rest lie within them.
KEYWORD_WINDOW_STRETCH = 2
# The search vector as no index has it: a query tests each row it reads, never asking the text index.
_UNINDEXED = Coalesce("search_vector", Value("", output_field=SearchVectorField()))
# Past this many windows of items the window is walked row by row; below it the planner chooses. Measured on the
# keyword candidates of the bench's queries (mean ms per query, runs in turn): at 5 windows (100k items) the
# planner's choice 16-25, walked 21-32; at 50 windows (1M items) the planner's 62-68, walked 40-54.
KEYWORD_WALK_FROM_WINDOWS = 10


def _newest_in_window(match, broadcast_type: str | None, domain: str | None) -> tuple[list[int], str] | None:
    """The SEARCH_KEYWORD_CANDIDATES newest matches, and the path that found them, when they lie among the newest
    items (ids are given in order), else None: the SEARCH_KEYWORD_WINDOW newest ("window"), or, when those held
    some matches but too few, up to KEYWORD_WINDOW_STRETCH windows, walked on only when the matches found so far
    project that the rest lie within them ("stretched"). The answer is the one the text index path gives: no match
    outside the range walked is newer than one inside it.

    On a network of more than KEYWORD_WALK_FROM_WINDOWS windows the range is walked newest first, each row tested
    against the query, never through the text index: its cost is the rows walked (about a microsecond each),
    whatever the query. Left to the planner there, a query with long posting lists (common words, Chinese or
    Japanese terms as phrases of character pairs) had the text index find all its matches in the whole network and
    intersected them with the range: 150-260 ms at 1M items. On a smaller network the text index is short and the
    planner's choice (the index for a rare query, the walk for a common one) is the cheaper."""
    wanted, window = int(settings.SEARCH_KEYWORD_CANDIDATES), int(settings.SEARCH_KEYWORD_WINDOW)
    if window == 0:
        return None
    # A literal bound, read first (an index lookup), not a subquery: the planner then knows how narrow the range is
    # and walks it; with the bound as a subquery it could not, and at 1M items the window gained nothing.
    newest_id = ProcessedItem.objects.order_by("-pk").values_list("pk", flat=True).first()
    if newest_id is None:
        return [], "window"
    vector = _UNINDEXED if newest_id > window * KEYWORD_WALK_FROM_WINDOWS else F("search_vector")
    walked = (
        visible_items(broadcast_type, domain)
        .alias(row_vector=vector)
        .filter(row_vector=match)
        .order_by("-pk")
        .values_list("pk", flat=True)
    )
    found = list(walked.filter(pk__gt=newest_id - window)[:wanted])
    if len(found) == wanted or newest_id <= window:  # enough, or the window held every item
        return found, "window"
    stretch = window * KEYWORD_WINDOW_STRETCH
    if not found or window * wanted > len(found) * stretch:
        return None  # too rare for a walk: the text index reads its few matches
    found += walked.filter(pk__gt=newest_id - stretch, pk__lte=newest_id - window)[: wanted - len(found)]
    if len(found) == wanted or newest_id <= stretch:
        return found, "stretched"
    return None


def _newest_matches(match, broadcast_type: str | None, domain: str | None):
    """The newest SEARCH_KEYWORD_CANDIDATES matches over the whole network, through the text index.

    Newest first by `pk + 0`, which the primary key's index cannot serve: ordered by the bare pk, the planner
    sometimes walks that index backwards and tests every row until it has enough matches, which is cheap for a
    query matching half the network and a full scan (150-250 ms at 100k items) for one that its statistics
    overestimate and that matches nothing. This way the full-text index always finds the matches and only they
    are sorted, so the cost follows the number of matches (which is why the window above is tried first)."""
    return (
        visible_items(broadcast_type, domain)
        .filter(search_vector=match)
        .annotate(newest=ExpressionWrapper(F("pk") + 0, output_field=BigIntegerField()))
        .order_by("-newest")
        .values("pk")[: int(settings.SEARCH_KEYWORD_CANDIDATES)]
    )
