"""Keyword query analysis: Chinese words from the segmenter, terms of the search lexicon matched across
languages (own-language matches first), and hyphenated words matched as the index stores them."""

import itertools

import pytest
from django.test import Client

from items.textsearch import _at_least, _without_longer_phrases, keyword_query, lexicon_group, query_units
from tests.factories import make_agent, make_completed_item

pytestmark = pytest.mark.django_db


def keyword_ids(client: Client, q: str) -> list[int]:
    response = client.get("/api/v1/search", {"q": q, "mode": "keyword"})
    assert response.status_code == 200, response.content
    return [int(item["item_id"]) for item in response.json()["items"]]


@pytest.fixture
def author_client():
    author, token = make_agent()
    return author, Client(HTTP_AUTHORIZATION=f"Bearer {token}")


def test_query_units_segment_chinese_and_keep_lexicon_phrases():
    assert query_units("冷链运输") == ["冷链", "运输"]
    assert query_units("显卡租赁") == ["显卡", "租赁"]
    assert query_units("Cold Chain transport") == ["cold chain", "transport"]
    # Japanese: lexicon terms first, the rest as bigrams as before
    assert query_units("機械学習エンジニア") == ["機械学習", "エンジニア"]
    assert "gpu" in lexicon_group("显卡") and "显卡" in lexicon_group("gpu")


def test_a_chinese_query_finds_items_in_other_words_and_languages_own_language_first(author_client):
    author, client = author_client
    chinese = make_completed_item(author, "我们在上海有 32 张 A100 显卡可以按小时出租。", keywords=[])
    english = make_completed_item(author, "Offering spare A100 GPUs in Frankfurt for short-term rental.", keywords=[])
    make_completed_item(author, "Selling a vintage road bike, pickup in Utrecht.", keywords=[])
    make_completed_item(author, "显卡驱动更新后出现蓝屏。", keywords=[])  # graphics card, but nothing rented
    # 显卡租赁: "graphics card" + "rental"; the Chinese item says 出租 (rent out), the English one GPU/rental.
    # Before, the query's three bigrams needed two matches and found nothing.
    assert keyword_ids(client, "显卡租赁") == [chinese.pk, english.pk]


def test_an_english_query_finds_a_chinese_item_through_the_lexicon(author_client):
    author, client = author_client
    chinese = make_completed_item(author, "台风预警：周四上午起沿海港口暂停作业。", keywords=[])
    make_completed_item(author, "Heavy rain expected in Osaka on Friday.", keywords=[])
    assert keyword_ids(client, "typhoon warning") == [chinese.pk]


def test_a_hyphenated_word_is_found_as_written(author_client):
    author, client = author_client
    visa = make_completed_item(
        author, "China extended its visa-free entry policy to twelve more countries.", keywords=[]
    )
    # Both parts, but not the hyphenated word: the query's term is the phrase the index stores for it.
    make_completed_item(author, "Free museum entry for holders of a student visa.", keywords=[])
    assert keyword_ids(client, "visa-free") == [visa.pk]


@pytest.mark.parametrize("size", range(1, 7))
def test_at_least_k_of_n_is_true_exactly_when_k_concepts_are(size):
    names = [f"c{n}" for n in range(size)]
    for needed in range(1, size + 1):
        formula = _at_least(needed, names).replace("&", " and ").replace("|", " or ")
        for values in itertools.product((False, True), repeat=size):
            truth = dict(zip(names, values, strict=True))
            assert eval(formula, {}, truth) is (sum(values) >= needed), (needed, values)  # noqa: S307


def test_a_concept_leaves_out_alternatives_that_contain_another():
    longer, shorter = "'大语' <-> '语言' <-> '言模' <-> '模型'", "'语言' <-> '言模' <-> '模型'"
    parts = ["'llm'", longer, shorter, "'api' <-> '接口'", "'api'"]
    assert _without_longer_phrases(parts) == ["'llm'", "'语言' <-> '言模' <-> '模型'", "'api'"]
    # Lexemes further apart (a stop word between) are not plain phrases: kept as they are.
    assert _without_longer_phrases(["'state' <3> 'art'", "'state'"]) == ["'state' <3> 'art'", "'state'"]
    match = keyword_query("LLM").match.source_expressions[0].value
    assert "'语言' <-> '言模' <-> '模型'" in match and "'大语'" not in match and "'大規'" not in match


def test_an_item_with_a_longer_form_of_a_concept_still_matches(author_client):
    author, client = author_client
    chinese = make_completed_item(author, "我们开放了大语言模型推理接口，按量计费。", keywords=[])
    japanese = make_completed_item(author, "大規模言語モデルの日本語評価セットを公開しました。", keywords=[])
    make_completed_item(author, "Selling a vintage road bike, pickup in Utrecht.", keywords=[])
    assert sorted(keyword_ids(client, "LLM")) == sorted([chinese.pk, japanese.pk])
