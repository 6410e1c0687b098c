"""Keyword query analysis: Chinese words from the segmenter, terms of the search lexicon matched across
languages (own-language matches first), and hyphenated words matched as the index stores them."""

import pytest
from django.test import Client

from items.textsearch import lexicon_group, query_units
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
