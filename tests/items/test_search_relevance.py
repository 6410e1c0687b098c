"""Search that serves readers, with the offline default (local analyzer, all-MiniLM-L6-v2): relevance bars in
every mode, CJK bigrams, weighted ranking, scores and matched modes, cursor paging, filtered semantic recall,
and the migration that re-indexes existing items."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps as django_apps
from django.contrib.postgres.search import SearchVector
from django.db import connection, transaction
from django.db.models import Value
from django.test import Client

from items.models import ProcessedItem, graph_key_sql, graph_query_sql
from items.semantic_search import SemanticFilters, _nearest
from pipeline.llm import embed
from tests.factories import make_agent, make_completed_item

pytestmark = pytest.mark.django_db

MODES = ("keyword", "semantic", "hybrid")


@pytest.fixture
def local(settings):
    """The offline default: local analyzer and the MiniLM embedding, semantic floor as calibrated."""
    settings.LLM_PROVIDER = "local"
    settings.LOCAL_EMBEDDING = "minilm"
    settings.SEARCH_MIN_SIMILARITY = None
    settings.RATE_LIMIT_READ_PER_MINUTE = 0
    author, token = make_agent()
    return author, Client(HTTP_AUTHORIZATION=f"Bearer {token}")


def item(author, content: str, **fields) -> ProcessedItem:
    """A completed item as the pipeline leaves it, with its real local embedding."""
    return make_completed_item(author, content, embedding=embed([content]).value[0], **fields)


def search(client: Client, q: str, mode: str, **params) -> dict:
    response = client.get("/api/v1/search", {"q": q, "mode": mode, **params})
    assert response.status_code == 200, response.content
    return response.json()


def ids(body: dict) -> list[int]:
    return [int(entry["item_id"]) for entry in body["items"]]


NETWORK = [
    "Offering 64 spare A100 GPUs in Frankfurt for short-term rental, billed per hour.",
    "Need an experienced engineer to set up a production Kubernetes cluster on bare metal.",
    "Critical vulnerability in OpenSSL allows remote code execution; patch now.",
    "Seeking office space for six people in Lisbon from February.",
    "Wholesale specialty coffee beans from Ethiopia and Colombia, roasted weekly.",
    "我们在上海有 32 张 A100 显卡可以按小时出租，适合大模型训练和推理。",
    "東京のデータセンターでGPUクラスターを時間単位でレンタルしています。",
]


def test_a_nonsense_query_returns_nothing_in_every_mode(local):
    author, client = local
    for content in NETWORK:
        item(author, content)
    for q in ("zzzqqq nonexistentword", "flurbo glimmerwax", "ほげほげ ふがふが"):
        for mode in MODES:
            body = search(client, q, mode)
            assert body["items"] == [], (q, mode, [entry["content"] for entry in body["items"]])
            assert body["has_more"] is False and body["next_cursor"] is None


def test_hybrid_returns_the_relevant_item_not_the_whole_network(local):
    author, client = local
    items = [item(author, content) for content in NETWORK]
    found = ids(search(client, "kubernetes", "hybrid"))
    assert found == [items[1].pk]


def test_a_two_character_chinese_substring_is_found(local):
    author, client = local
    chinese = item(author, "我们在上海有 32 张 A100 显卡可以按小时出租，适合大模型训练和推理。")
    english = item(author, "Offering 64 spare A100 GPUs in Frankfurt for short-term rental, billed per hour.")
    for q in ("上海", "小时", "海有"):  # "海有" spans two words: still a substring of the text
        assert ids(search(client, q, "keyword")) == [chinese.pk], q
    # 显卡 (graphics card) and 出租 (rent out) find the English offer too, through the search lexicon; the
    # item in the query's own words first.
    for q in ("显卡", "出租"):
        assert ids(search(client, q, "keyword")) == [chinese.pk, english.pk], q
    assert ids(search(client, "北京", "keyword")) == []


def test_a_japanese_katakana_word_is_found(local):
    author, client = local
    japanese = item(author, "東京のデータセンターでGPUクラスターを時間単位でレンタルしています。")
    item(author, "Need an experienced engineer to set up production Kubernetes on bare metal.")
    for q in ("クラスター", "ｸﾗｽﾀｰ", "データセンター"):  # half-width katakana is normalised too
        assert ids(search(client, q, "keyword")) == [japanese.pk], q
    assert ids(search(client, "サーバー", "keyword")) == []


def test_a_paraphrase_is_found_semantically_with_the_local_model(local):
    author, client = local
    paraphrase = item(author, "Hourly hire of idle graphics processors for model training.")
    item(author, "Selling a vintage road bike, pickup in Utrecht.")
    assert ids(search(client, "gpu rental", "keyword")) == []  # no shared word
    body = search(client, "gpu rental", "semantic")
    assert ids(body) == [paraphrase.pk]
    hit = body["items"][0]
    assert hit["matched"] == ["semantic"] and hit["keyword_score"] is None
    assert 0.35 <= hit["semantic_score"] == hit["score"] <= 1.0


def test_keyword_ranking_weighs_keywords_above_content(local):
    author, client = local
    in_content = item(author, "Team update: our kubernetes notes are in the wiki.", keywords=["wiki", "notes"])
    in_keywords = item(author, "Team update: cluster operations notes for the wiki.", keywords=["kubernetes"])
    body = search(client, "kubernetes", "keyword")
    assert ids(body) == [in_keywords.pk, in_content.pk]
    first, second = body["items"]
    assert first["keyword_score"] > second["keyword_score"] > 0
    assert first["matched"] == ["keyword"] and first["semantic_score"] is None


def test_keyword_ranking_is_bounded_to_the_most_recent_matches(local, settings):
    """Only the SEARCH_KEYWORD_CANDIDATES newest matches are ranked: an older item is not returned even when
    it would rank first, so a query matching most of the network costs what one matching a few does."""
    author, client = local
    best_but_oldest = item(
        author, "Sourdough bakery course, sourdough starter, sourdough bread.", keywords=["sourdough"]
    )
    newer = [item(author, f"Weekend market stall number {n} also sells sourdough loaves.") for n in range(3)]
    settings.SEARCH_KEYWORD_CANDIDATES = 3
    assert set(ids(search(client, "sourdough", "keyword"))) == {newer_item.pk for newer_item in newer}
    settings.SEARCH_KEYWORD_CANDIDATES = 4
    assert ids(search(client, "sourdough", "keyword"))[0] == best_but_oldest.pk


def test_hybrid_reports_both_modes_for_an_item_found_by_both(local):
    author, client = local
    both = item(author, "Kubernetes cluster rental with managed upgrades, from 400 EUR per month.")
    body = search(client, "kubernetes cluster", "hybrid")
    assert ids(body)[0] == both.pk
    hit = body["items"][0]
    assert hit["matched"] == ["keyword", "semantic"]
    assert hit["keyword_score"] > 0 and hit["semantic_score"] > 0.35 and hit["score"] > 0


def test_a_longer_plain_query_needs_most_of_its_terms(local):
    author, client = local
    match = item(author, "Central bank cuts the interest rate by 25 basis points.")
    item(author, "The bank opens a new branch in Porto.")  # one term of four: not a match
    assert ids(search(client, "central bank interest rate", "keyword")) == [match.pk]
    # Web-search operators are taken literally: a phrase, or an excluded word.
    assert ids(search(client, '"interest rate"', "keyword")) == [match.pk]
    assert ids(search(client, "bank -porto", "keyword")) == [match.pk]


def test_search_pages_with_a_cursor(local):
    author, client = local
    made = [item(author, f"Kubernetes cluster help wanted, project {n}.") for n in range(5)]
    first = search(client, "kubernetes", "keyword", limit=2)
    assert len(first["items"]) == 2 and first["has_more"] is True and first["next_cursor"]
    second = search(client, "kubernetes", "keyword", limit=2, cursor=first["next_cursor"])
    third = search(client, "kubernetes", "keyword", limit=2, cursor=second["next_cursor"])
    seen = ids(first) + ids(second) + ids(third)
    assert sorted(seen) == sorted(entry.pk for entry in made) and len(set(seen)) == 5
    assert third["has_more"] is False and third["next_cursor"] is None
    # A cursor belongs to its search: another query (or mode) refuses it by name.
    response = client.get("/api/v1/search", {"q": "cluster", "mode": "keyword", "cursor": first["next_cursor"]})
    assert response.status_code == 422 and response.json()["error"]["field"] == "cursor"
    response = client.get("/api/v1/search", {"q": "kubernetes", "mode": "keyword", "cursor": "bm90LWEtY3Vyc29y"})
    assert response.status_code == 422


@pytest.mark.slow  # embeds a large set of items (over 10 s)
@pytest.mark.django_db(transaction=True)  # 300 rows: truncated afterwards, not left as dead tuples in the index
def test_filtered_semantic_search_returns_every_matching_item(local):
    """A filter that only a few of the nearest items pass: the index's first candidates alone would starve it."""
    author, client = local
    base = embed(["GPU rental by the hour in Frankfurt"]).value[0]
    near = []
    for n in range(300):  # the nearest items, all of the wrong type
        vector = [x + (0.002 * ((n * 7 + i) % 13 - 6)) for i, x in enumerate(base)]
        near.append(
            make_completed_item(author, f"GPU rental offer number {n}", embedding=vector, broadcast_type="info")
        )
    wanted = [
        make_completed_item(author, f"Renting GPUs, slot {n}", embedding=embed([f"Renting GPUs, slot {n}"]).value[0])
        for n in range(5)
    ]
    for entry in wanted:
        ProcessedItem.objects.filter(pk=entry.pk).update(broadcast_type="supply", domains=["legal"])
    with connection.cursor() as cursor:
        # On a table this small the planner would sort the filtered rows; on a large network it walks the HNSW
        # index. No sorting leaves it only the index (the exact fallback turns index scans off altogether).
        cursor.execute("SET enable_sort = off")
    try:
        # The setup does starve a plain index scan of the whole graph: pgvector's default ef_search hands out
        # 40 candidates, and a domain filter is applied after them.
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SET LOCAL hnsw.ef_search = 40")
            plain = _nearest(base, SemanticFilters(domain="legal"), 20)
            # A type filter walks its type's own graph (a partial index): nothing to starve it.
            by_type = _nearest(base, SemanticFilters(broadcast_type="supply"), 20)
            cursor.execute(
                "EXPLAIN SELECT raw_id FROM items_processeditem WHERE broadcast_type = 'supply' "  # noqa: S608
                f"ORDER BY {graph_key_sql('embedding')} <=> {graph_query_sql('%s')} LIMIT 20",
                [str(base)],
            )
            plan = "\n".join(row[0] for row in cursor.fetchall())
        assert len(plain) < len(wanted)
        assert sorted(pk for pk, _ in by_type) == sorted(entry.pk for entry in wanted)
        assert "processed_hnsw_supply" in plan, plan
        query = "GPU rental by the hour in Frankfurt"
        by_domain = ids(search(client, query, "semantic", domain="legal", limit=20))
        by_type = ids(search(client, query, "semantic", broadcast_type="supply", limit=20))
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET enable_sort")
    assert sorted(by_domain) == sorted(entry.pk for entry in wanted)
    assert sorted(by_type) == sorted(entry.pk for entry in wanted)


def test_the_migration_reindexes_existing_items(local):
    author, client = local
    old = item(author, "我们在上海有显卡出租。")
    # As the previous release stored it: the `simple` configuration, no bigrams.
    ProcessedItem.objects.filter(pk=old.pk).update(search_vector=SearchVector(Value(old.raw.content), config="simple"))
    assert ids(search(client, "上海", "keyword")) == []
    migration = importlib.import_module("items.migrations.0010_search_vector_cjk_bigrams")
    with connection.schema_editor() as editor:
        migration.reindex(django_apps, editor)
    assert ids(search(client, "上海", "keyword")) == [old.pk]
