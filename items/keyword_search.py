"""Keyword search's candidates: the newest items that clear the keyword bar (items.textsearch), ranked by
ts_rank_cd over the stored weighted vector, at a cost bounded as the network grows (docs/search.md, docs/scaling.md).

The newest matches are looked for first by walking the newest items (the window, then a little further when the
matches found so far say the rest lie there); only when those hold too few does the text index find them over the
whole network, within what is left of SEARCH_KEYWORD_BUDGET_MS; past it the answer is the walk's, marked partial.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.postgres.search import SearchRank, SearchVectorField
from django.db import OperationalError, connections, router, transaction
from django.db.models import BigIntegerField, ExpressionWrapper, F, Subquery, Value
from django.db.models.functions import Coalesce
from prometheus_client import Counter
from psycopg.errors import QueryCanceled

from items import textsearch
from items.models import ProcessedItem
from items.selectors import visible_items

KEYWORD_CANDIDATE_PATHS = Counter(
    "eigenflux_search_keyword_candidates_total",
    "Keyword searches by how their newest matches were found: within the window of the newest items (window), "
    "walking a few windows further (stretched), through the text index over the whole network (text_index), or, "
    "when that ran past SEARCH_KEYWORD_BUDGET_MS, only among the newest items walked (budget).",
    ["path"],
)


@dataclass(frozen=True)
class KeywordMatches:
    """Keyword search's candidates, best first, as (item id, keyword score); `partial` when the text index path ran
    past SEARCH_KEYWORD_BUDGET_MS and they are only the matches among the newest items walked."""

    ranked: list[tuple[int, float]]
    partial: bool = False


def keyword_candidates(*, q: str, broadcast_type: str | None, domain: str | None, depth: int) -> KeywordMatches:
    """Items that clear the keyword bar (items.textsearch), by ts_rank_cd over the stored weighted vector
    (keywords above summary above content), normalised to rank / (rank + 1). Only the most recent
    SEARCH_KEYWORD_CANDIDATES matches are ranked, so a query matching most of the network costs the same as
    one matching a few hundred items.

    SEARCH_KEYWORD_BUDGET_MS is wall-clock time from the first read: when the walk of the newest items has not found
    enough, what is left of it is the whole-network text index query's statement_timeout (the walk itself and the
    final ranking are not cut short). Past it the server cancels the query and the answer is ranked from the matches
    the walk found (`partial`)."""
    query = textsearch.keyword_query(q)
    if query is None:
        return KeywordMatches([])

    def rank_by(tsquery):
        return SearchRank(
            F("search_vector"), tsquery, weights=textsearch.RANK_WEIGHTS, normalization=Value(32), cover_density=True
        )

    # Each rank is in [0, 1); the mean of the two keeps keyword_score there, and an item written in the
    # query's own words ranks above one found only through the lexicon's translations.
    rank = rank_by(query.rank) if query.own is None else (rank_by(query.rank) + rank_by(query.own)) / 2

    def ranked(recent: Any) -> list[tuple[int, float]]:
        rows = (
            ProcessedItem.objects.filter(pk__in=recent)
            .annotate(rank=rank)
            .order_by("-rank", "-pk")
            .values_list("pk", "rank")[:depth]
        )
        return [(pk, float(score)) for pk, score in rows]

    # The budget is wall-clock time from the first read, not the parsing of the query (a first Chinese query loads
    # its segmenter).
    started = time.monotonic()
    walked = _newest_in_window(query.match, broadcast_type, domain)
    if walked.path is not None:
        KEYWORD_CANDIDATE_PATHS.labels(walked.path).inc()
        return KeywordMatches(ranked(walked.found))
    budget = int(settings.SEARCH_KEYWORD_BUDGET_MS)
    left = round(budget - (time.monotonic() - started) * 1000) if budget else 0
    if not budget or left >= 1:
        answer = _whole_network(lambda: ranked(Subquery(_newest_matches(query.match, broadcast_type, domain))), left)
        if answer is not None:
            KEYWORD_CANDIDATE_PATHS.labels("text_index").inc()
            return KeywordMatches(answer)
    KEYWORD_CANDIDATE_PATHS.labels("budget").inc()
    return KeywordMatches(ranked(walked.found), partial=True)


def _whole_network(answer_of: Callable[[], list[tuple[int, float]]], left: int) -> list[tuple[int, float]] | None:
    """The text index path's answer, read in its own transaction with its settings (left: the budget's ms, 0: no
    budget), or None when the timeout in force cut it short."""
    # Its own transaction on the connection the reads go to (a replica's, in replica_reads), where the settings apply.
    alias = router.db_for_read(ProcessedItem)
    answer: list[tuple[int, float]] | None = None
    asked, timeout = 0.0, 0
    try:
        with transaction.atomic(using=alias), _text_index_settings(alias, timeout_ms=left) as timeout:
            asked = time.monotonic()
            answer = answer_of()
    except OperationalError as exc:
        # Only the timeout in force, and only on the query itself: a cancel from elsewhere (an operator's) is an
        # error, and an answer read whole stands even if giving the settings back was cut short.
        if answer is None and not (left and _timed_out(exc, asked, timeout)):
            raise
    return answer


def _timed_out(exc: OperationalError, asked: float, timeout_ms: int) -> bool:
    """PostgreSQL cancelled the statement asked at `asked` (monotonic) for the statement_timeout in force, not at an
    operator's request: told apart by the time it ran, since the server's message may be in another language."""
    ran_ms = (time.monotonic() - asked) * 1000 if asked else 0.0
    return isinstance(exc.__cause__, QueryCanceled) and 0 < timeout_ms <= ran_ms + 1


@contextmanager
def _text_index_settings(alias: str, *, timeout_ms: int) -> Iterator[int]:
    """Give the transaction of the text index path SEARCH_KEYWORD_WORK_MEM_MB of work_mem and what is left of the
    search's budget as statement_timeout (0: none; a stricter one already in force stays), in one round trip, and
    give back what the connection had when the block ends well (the transaction may be a savepoint in an outer one,
    where a local setting would outlive it; a block that fails rolls back to before them). Yields the statement_timeout
    in force, in ms (0: none).

    work_mem: the path intersects the text index's bitmap of matches with a filter's (the domains index); a bitmap
    larger than work_mem goes lossy: it keeps whole pages instead of rows, and every row on such a page is read and
    tested again. At 1M items, with the server's default 4 MB, a `domain` search read 10,000 pages to test 100,000
    rows and found none (300 ms); with 8 MB its bitmaps stayed exact and it read none (docs/scaling.md).

    The budget: at 1M items a few queries' text index paths take 100-200 ms (a concept with long posting lists, or
    a filter that removes most of its matches only once their rows are read); past it the search answers from the
    newest items instead (docs/scaling.md)."""
    megabytes = int(settings.SEARCH_KEYWORD_WORK_MEM_MB)
    with connections[alias].cursor() as cursor:
        cursor.execute(
            "SELECT current_setting('work_mem'), setting::int FROM pg_settings WHERE name = 'statement_timeout'"
        )
        work_mem, current_timeout = cursor.fetchone()
        previous = {"work_mem": work_mem, "statement_timeout": f"{current_timeout}ms"}
        wanted = {"work_mem": f"{megabytes}MB"} if megabytes else {}
        if timeout_ms and not 0 < current_timeout <= timeout_ms:  # a stricter timeout already set (a role's) stays
            wanted["statement_timeout"] = f"{timeout_ms}ms"
        _set_local(cursor, wanted)
    yield timeout_ms if "statement_timeout" in wanted else current_timeout
    with connections[alias].cursor() as cursor:
        _set_local(cursor, {name: previous[name] for name in wanted})


def _set_local(cursor, values: dict[str, str]) -> None:
    """These settings for the rest of the transaction (set_config's is_local), in one round trip."""
    if values:
        calls = ", ".join("set_config(%s, %s, true)" for _ in values)
        cursor.execute(f"SELECT {calls}", [part for pair in values.items() for part in pair])


# How far past SEARCH_KEYWORD_WINDOW a walk goes on when the window held some matches but too few: up to this many
# windows, and only when the matches found so far say the rest lie within them.
KEYWORD_WINDOW_STRETCH = 2
# The search vector as no index has it: a query tests each row it reads, never asking the text index.
_UNINDEXED = Coalesce("search_vector", Value("", output_field=SearchVectorField()))
# Past this many windows of items the window is walked row by row; below it the planner chooses. Measured on the
# keyword candidates of the bench's queries (mean ms per query, runs in turn): at 5 windows (100k items) the
# planner's choice 16-25, walked 21-32; at 50 windows (1M items) the planner's 62-68, walked 40-54.
KEYWORD_WALK_FROM_WINDOWS = 10


@dataclass(frozen=True)
class Walked:
    found: list[int]
    path: str | None  # None: the newest matches are not all among the items walked


def _newest_in_window(match, broadcast_type: str | None, domain: str | None) -> Walked:
    """The SEARCH_KEYWORD_CANDIDATES newest matches, and the path that found them, when they lie among the newest
    items (ids are given in order): the SEARCH_KEYWORD_WINDOW newest ("window"), or, when those held some matches
    but too few, up to KEYWORD_WINDOW_STRETCH windows, walked on only when the matches found so far project that the
    rest lie within them ("stretched"). The answer is the one the text index path gives: no match outside the range
    walked is newer than one inside it. Otherwise the path is None, with the fewer matches the walk found.

    On a network of more than KEYWORD_WALK_FROM_WINDOWS windows the range is walked newest first, each row tested
    against the query, never through the text index: its cost is the rows walked (about a microsecond each),
    whatever the query. Left to the planner there, a query with long posting lists (common words, Chinese or
    Japanese terms as phrases of character pairs) had the text index find all its matches in the whole network and
    intersected them with the range: 150-260 ms at 1M items. On a smaller network the text index is short and the
    planner's choice (the index for a rare query, the walk for a common one) is the cheaper."""
    wanted, window = int(settings.SEARCH_KEYWORD_CANDIDATES), int(settings.SEARCH_KEYWORD_WINDOW)
    if window == 0:
        return Walked([], None)
    # A literal bound, read first (an index lookup), not a subquery: the planner then knows how narrow the range is
    # and walks it; with the bound as a subquery it could not, and at 1M items the window gained nothing.
    newest_id = ProcessedItem.objects.order_by("-pk").values_list("pk", flat=True).first()
    if newest_id is None:
        return Walked([], "window")
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
        return Walked(found, "window")
    stretch = window * KEYWORD_WINDOW_STRETCH
    if not found or window * wanted > len(found) * stretch:
        return Walked(found, None)  # too rare for a walk: the text index reads its few matches
    found += walked.filter(pk__gt=newest_id - stretch, pk__lte=newest_id - window)[: wanted - len(found)]
    if len(found) == wanted or newest_id <= stretch:
        return Walked(found, "stretched")
    return Walked(found, None)


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
