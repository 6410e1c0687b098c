"""Keyword search's paths on a network of many items, made small: the window of the newest items, the walk
further, the whole-network text index (its work_mem and its time budget), and the plans they must not take."""

from __future__ import annotations

import pytest
from django.db import OperationalError, connection, transaction
from django.test.utils import CaptureQueriesContext

from items import keyword_search as search_module
from items.keyword_search import KEYWORD_CANDIDATE_PATHS, keyword_candidates
from tests.items import test_search_relevance as relevance

pytestmark = pytest.mark.django_db

local = relevance.local  # the offline default (a fixture)
item, search, ids = relevance.item, relevance.search, relevance.ids


def keyword_paths() -> dict[str, float]:
    samples = KEYWORD_CANDIDATE_PATHS.collect()[0].samples
    return {sample.labels["path"]: sample.value for sample in samples if sample.name.endswith("_total")}


def test_a_common_query_finds_its_newest_matches_among_the_newest_items(local, settings):
    """When the newest SEARCH_KEYWORD_WINDOW items hold SEARCH_KEYWORD_CANDIDATES matches, those are the newest
    matches (a bounded read); when they hold some but too few, the walk goes on a few windows further; when they
    hold none, the text index finds them over the whole network. Every way the answer is the same."""
    author, client = local
    oldest = item(author, "Sourdough bakery course, sourdough starter, sourdough bread.", keywords=["sourdough"])
    newer = [item(author, f"Weekend market stall number {n} also sells sourdough loaves.") for n in range(3)]
    for n in range(4):
        item(author, f"Weekend market stall number {n} sells cheese.")
    settings.SEARCH_KEYWORD_CANDIDATES = 3

    def answered(window: int, path: str) -> None:
        settings.SEARCH_KEYWORD_WINDOW = window
        before = keyword_paths()
        assert set(ids(search(client, "sourdough", "keyword"))) == {entry.pk for entry in newer}
        assert keyword_paths().get(path, 0) == before.get(path, 0) + 1

    answered(7, "window")  # the three newer sourdough items and the four cheese ones
    answered(6, "stretched")  # two of the three: the third lies one item further
    answered(4, "text_index")  # only cheese: no walk, the text index finds them
    settings.SEARCH_KEYWORD_CANDIDATES = 4  # the window never holds four: the oldest, best match is found
    settings.SEARCH_KEYWORD_WINDOW = 20000
    assert ids(search(client, "sourdough", "keyword"))[0] == oldest.pk


def test_the_text_index_path_runs_with_the_work_mem_that_keeps_its_bitmaps_exact(local, settings):
    """The whole-network text index path (and only it) ranks its matches in a transaction given
    SEARCH_KEYWORD_WORK_MEM_MB of work_mem, so its bitmaps stay exact on a large network; 0 leaves the server's."""
    author, _client = local
    for n in range(3):
        item(author, f"Weekend market stall number {n} sells sourdough loaves.")
    item(author, "Weekend market stall sells cheese.")
    settings.SEARCH_KEYWORD_CANDIDATES = 3
    with connection.cursor() as cursor:
        cursor.execute("SHOW work_mem")
        (server_default,) = cursor.fetchone()
    settings.SEARCH_KEYWORD_WORK_MEM_MB = 48 if server_default != "48MB" else 40

    def work_mem_while_ranking(window: int) -> str:
        settings.SEARCH_KEYWORD_WINDOW = window
        seen: list[str] = []

        def capture(execute, sql, params, many, context):
            result = execute(sql, params, many, context)
            if "ts_rank_cd" in sql:
                with connection.cursor() as cursor:
                    cursor.execute("SHOW work_mem")
                    seen.append(cursor.fetchone()[0])
            return result

        with transaction.atomic():  # a test's own transaction: rolled back, as the test's is
            with connection.execute_wrapper(capture):
                assert len(keyword_candidates(q="sourdough", broadcast_type=None, domain=None, depth=5).ranked) == 3
            transaction.set_rollback(True)
        (value,) = seen
        return value

    assert work_mem_while_ranking(1) == f"{settings.SEARCH_KEYWORD_WORK_MEM_MB}MB"  # the newest item holds none
    assert work_mem_while_ranking(20000) == server_default  # the window path
    settings.SEARCH_KEYWORD_WORK_MEM_MB = 0
    assert work_mem_while_ranking(1) == server_default


def test_a_type_filter_has_a_btree_index_for_the_text_index_path_to_intersect():
    """The text index path of a type-filtered keyword search intersects its matches with this index's rows of the
    type, so it never reads the rows of other types (at 1M items: 4x cheaper for a simple term, docs/scaling.md)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'processed_type'")
        (definition,) = cursor.fetchone()
    assert definition.endswith("USING btree (broadcast_type)"), definition


def one_recent_match_of_six(author, settings, monkeypatch):
    """Five old matches, eight other items, one recent match; six wanted, a window of two items walked row by row:
    one match in two items projects the other five 12 items back, past two windows, so the text index answers."""
    old = [item(author, f"Archive note {n}: sourdough recipe from the old bakery.") for n in range(5)]
    for n in range(8):
        item(author, f"Weekend market stall number {n} sells cheese.")
    recent = item(author, "Fresh sourdough loaves at the weekend market.")
    settings.SEARCH_KEYWORD_CANDIDATES = 6
    settings.SEARCH_KEYWORD_WINDOW = 2
    monkeypatch.setattr(search_module, "KEYWORD_WALK_FROM_WINDOWS", 0)  # walked row by row, whatever the size
    return old, recent


def test_a_window_with_too_few_matches_is_not_walked_on(local, settings, monkeypatch):
    """A window with very few matches for many wanted is not walked on (the walk would read
    KEYWORD_WINDOW_STRETCH windows for nothing): the text index answers at once, and finds the older ones."""
    author, client = local
    old, recent = one_recent_match_of_six(author, settings, monkeypatch)
    before = keyword_paths()
    with CaptureQueriesContext(connection) as queries:
        assert set(ids(search(client, "sourdough", "keyword"))) == {recent.pk, *(entry.pk for entry in old)}
    assert keyword_paths().get("text_index", 0) == before.get("text_index", 0) + 1
    walk = 'COALESCE("items_processeditem"."search_vector"'
    walks = [query for query in queries.captured_queries if walk in query["sql"]]
    assert len(walks) == 1  # the window's, and no stretched walk


def test_the_window_is_walked_row_by_row_only_on_a_network_of_many_windows(local, settings, monkeypatch):
    """Past KEYWORD_WALK_FROM_WINDOWS windows of items the window's rows are each tested against the query (the
    search vector as no index has it), so the text index's posting lists are never read for a common query; on a
    smaller network the planner chooses. The answer is the same."""
    author, client = local
    made = [item(author, f"Weekend market stall number {n} sells sourdough loaves.") for n in range(4)]
    settings.SEARCH_KEYWORD_CANDIDATES = 3
    settings.SEARCH_KEYWORD_WINDOW = 5
    newest = sorted(entry.pk for entry in made)[-3:]
    walk = 'COALESCE("items_processeditem"."search_vector"'
    for threshold, walked in ((made[-1].pk // 5 + 1, False), (made[-1].pk // 5 - 1, True)):
        monkeypatch.setattr(search_module, "KEYWORD_WALK_FROM_WINDOWS", threshold)
        with CaptureQueriesContext(connection) as queries:
            assert sorted(ids(search(client, "sourdough", "keyword"))) == newest
        assert any(walk in query["sql"] for query in queries.captured_queries) is walked


def test_the_newest_matches_are_found_through_the_text_index_not_by_walking_the_primary_key(local):
    """Walking the primary key's index backwards, testing each row, is a full scan when the planner
    overestimates how many rows match (150-250 ms at 100k items for a query that matches none). Even with
    every other plan priced out, the candidate query cannot be served by that walk."""
    author, _client = local
    for n in range(30):
        item(author, f"Weekend market stall number {n} sells sourdough loaves.")
    captured: list[tuple[str, object]] = []

    def capture(execute, sql, params, many, context):
        captured.append((sql, params))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(capture):
        assert len(keyword_candidates(q="sourdough", broadcast_type=None, domain=None, depth=5).ranked) == 5
    ((sql, params),) = [(sql, params) for sql, params in captured if "ts_rank_cd" in sql]
    with transaction.atomic(), connection.cursor() as cursor:
        for plan_kind in ("seqscan", "bitmapscan", "sort"):  # every plan but an ordered index walk priced out
            cursor.execute(f"SET LOCAL enable_{plan_kind} = off")
        cursor.execute("EXPLAIN " + sql, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    # u0: the candidates' subquery (the outer query may walk the key to join or order its few rows).
    assert "Index Scan Backward using items_processeditem_pkey on items_processeditem u0" not in plan, plan


class Sleeps:
    """An execute wrapper: each query whose SQL holds `marker` first sleeps `seconds` on the server (as a query over
    long posting lists would take that long); `count` says how many did."""

    def __init__(self, marker: str, seconds: float) -> None:
        self.marker, self.seconds, self.count = marker, seconds, 0

    def __call__(self, execute, sql, params, many, context):
        if self.marker in sql:
            self.count += 1
            context["cursor"].execute("SELECT pg_sleep(%s)", [self.seconds])
        return execute(sql, params, many, context)


TEXT_INDEX_QUERY = '"raw_id" + %s) DESC'  # the whole-network path's candidates, newest first by `pk + 0`
WALK_QUERY = 'COALESCE("items_processeditem"."search_vector"'  # the walk of the newest items, row by row


def _text_index_path_sleeps(seconds: float) -> Sleeps:
    return Sleeps(TEXT_INDEX_QUERY, seconds)


def test_a_text_index_path_past_its_budget_answers_from_the_newest_items_and_says_so(local, settings, monkeypatch):
    """The whole-network text index path may take SEARCH_KEYWORD_BUDGET_MS; past it the server cancels it and the
    search answers from the matches among the newest items walked, marked partial (keyword and hybrid), and nothing
    of the cancelled transaction's settings outlives it. With no budget the slow path runs to its end, and a cancel
    from elsewhere is an error."""
    author, client = local
    old, recent = one_recent_match_of_six(author, settings, monkeypatch)
    settings.SEARCH_KEYWORD_BUDGET_MS = 500  # far from the sleeps either way, on a busy machine too
    with connection.cursor() as cursor:
        cursor.execute("SHOW statement_timeout")
        (server_default,) = cursor.fetchone()
    before = keyword_paths()
    with connection.execute_wrapper(within := _text_index_path_sleeps(0.05)):
        body = search(client, "sourdough", "keyword")
    assert set(ids(body)) == {recent.pk, *(entry.pk for entry in old)} and body["partial"] is False
    assert within.count == 1
    with connection.execute_wrapper(past := _text_index_path_sleeps(3.0)):
        for mode in ("keyword", "hybrid"):
            body = search(client, "sourdough", mode)
            assert body["partial"] is True, mode
            keyword_found = [entry for entry in body["items"] if "keyword" in entry["matched"]]
            assert [int(entry["item_id"]) for entry in keyword_found] == [recent.pk], mode
    assert past.count == 2
    after = keyword_paths()
    assert after.get("budget", 0) == before.get("budget", 0) + 2
    assert after.get("text_index", 0) == before.get("text_index", 0) + 1
    with connection.cursor() as cursor:
        cursor.execute("SHOW statement_timeout")
        assert cursor.fetchone()[0] == server_default  # in the test's own transaction, after both paths
    settings.SEARCH_KEYWORD_BUDGET_MS = 0
    with connection.execute_wrapper(slow := _text_index_path_sleeps(0.3)):
        body = search(client, "sourdough", "keyword")
    assert set(ids(body)) == {recent.pk, *(entry.pk for entry in old)} and body["partial"] is False
    assert slow.count == 1
    # With no budget of ours, a cancel from elsewhere (here the server's own statement_timeout) is an error.
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL statement_timeout = '100ms'")
        with connection.execute_wrapper(_text_index_path_sleeps(3.0)), pytest.raises(OperationalError):
            keyword_candidates(q="sourdough", broadcast_type=None, domain=None, depth=5)
        transaction.set_rollback(True)


def test_a_walk_that_used_up_the_budget_answers_from_its_matches_without_the_text_index(local, settings, monkeypatch):
    """The budget counts from the first read: a walk of the newest items that took all of it leaves nothing for the
    text index, which is not asked at all; the walk's matches answer, marked partial."""
    author, client = local
    _old, recent = one_recent_match_of_six(author, settings, monkeypatch)
    settings.SEARCH_KEYWORD_BUDGET_MS = 20
    text_index = _text_index_path_sleeps(0)
    with connection.execute_wrapper(walk := Sleeps(WALK_QUERY, 0.05)), connection.execute_wrapper(text_index):
        body = search(client, "sourdough", "keyword")
    assert walk.count == 1 and text_index.count == 0
    assert ids(body) == [recent.pk] and body["partial"] is True


def test_the_budget_never_loosens_a_stricter_statement_timeout_already_in_force(local, settings, monkeypatch):
    """An operator's own statement_timeout (a role's, say) that is stricter than what is left of the budget stays in
    force for the text index query; a looser one gives way to the budget; either is given back afterwards."""
    author, _client = local
    one_recent_match_of_six(author, settings, monkeypatch)
    settings.SEARCH_KEYWORD_BUDGET_MS = 500

    def in_force_during_the_query(outer: str) -> tuple[str, str]:
        seen: list[str] = []

        def capture(execute, sql, params, many, context):
            if TEXT_INDEX_QUERY in sql:
                context["cursor"].execute("SHOW statement_timeout")
                seen.append(context["cursor"].fetchone()[0])
            return execute(sql, params, many, context)

        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(f"SET LOCAL statement_timeout = '{outer}'")
            with connection.execute_wrapper(capture):
                keyword_candidates(q="sourdough", broadcast_type=None, domain=None, depth=5)
            cursor.execute("SHOW statement_timeout")
            after = cursor.fetchone()[0]
            transaction.set_rollback(True)
        (during,) = seen
        return during, after

    assert in_force_during_the_query("200ms") == ("200ms", "200ms")
    during, after = in_force_during_the_query("2s")
    assert during.endswith("ms") and 0 < int(during.removesuffix("ms")) <= 500 and after == "2s"
