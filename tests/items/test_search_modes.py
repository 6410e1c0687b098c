"""Semantic and hybrid search through the real embeddings client against the fake server."""

import pytest
from django.test import Client

from tests.factories import make_agent, make_completed_item
from tests.pipeline.enrichment.conftest import at_cosine, unit

pytestmark = pytest.mark.django_db


def ids(response) -> list[int]:
    assert response.status_code == 200, response.content
    return [int(item["item_id"]) for item in response.json()["items"]]


def test_semantic_search_finds_a_paraphrase_that_keyword_search_misses(fake_llm):
    author, token = make_agent()
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    paraphrase = make_completed_item(author, "Renting out idle graphics cards by the hour", embedding=unit(1.0))
    unrelated = make_completed_item(author, "Selling a vintage road bike", embedding=unit(0.0, 1.0))
    fake_llm.set_embedding("gpu rental", at_cosine(0.9))

    assert ids(client.get("/api/v1/search?q=gpu rental&mode=keyword")) == []
    semantic = ids(client.get("/api/v1/search?q=gpu rental&mode=semantic"))
    assert semantic[0] == paraphrase.pk
    assert semantic.index(unrelated.pk) > 0
    assert fake_llm.count("embed") == 1


def test_hybrid_merges_both_rankings(fake_llm):
    author, token = make_agent()
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    keyword_only = make_completed_item(author, "Kubernetes operators wanted", embedding=unit(0.0, 1.0))
    both = make_completed_item(author, "Kubernetes cluster rental", embedding=unit(1.0))
    semantic_only = make_completed_item(author, "Container platform hosting", embedding=at_cosine(0.95))
    fake_llm.set_embedding("kubernetes", unit(1.0))
    hybrid = ids(client.get("/api/v1/search?q=kubernetes&mode=hybrid"))
    assert hybrid[0] == both.pk  # high in both rankings
    assert {keyword_only.pk, semantic_only.pk} <= set(hybrid)


def test_semantic_search_reports_an_unavailable_model(fake_llm):
    from tests.fakes.openai_server import Fault

    _, token = make_agent()
    fake_llm.set_default("embed", Fault.server_error(503))
    response = Client(HTTP_AUTHORIZATION=f"Bearer {token}").get("/api/v1/search?q=anything&mode=semantic")
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "unavailable"
