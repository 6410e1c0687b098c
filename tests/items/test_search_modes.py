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
    paraphrase = make_completed_item(
        author, "Renting out idle accelerator boards by the hour", embedding=unit(1.0), keywords=["accelerator"]
    )
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


# --- bounds on the embedding calls -----------------------------------------------------------------


def search(client: Client, q: str, mode: str = "semantic"):
    return client.get("/api/v1/search", {"q": q, "mode": mode})


def test_query_embeddings_are_cached_by_text(fake_llm, settings):
    _, token = make_agent()
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    make_completed_item(content="GPU hours in Frankfurt", embedding=unit(1.0))
    first = search(client, "gpu  rental ")
    assert search(client, "gpu rental").json() == first.json()
    assert search(client, " gpu rental", mode="hybrid").status_code == 200
    (request,) = fake_llm.requests_for("embed")  # one model call for the three searches
    assert request.json["input"] == ["gpu rental"]
    # Another embedding model is another cache entry: no vector from the old model is reused.
    settings.EMBEDDING_MODEL = "fake-embedding-2"
    assert search(client, "gpu rental").status_code == 200
    assert [r.model for r in fake_llm.requests_for("embed")] == ["fake-embedding", "fake-embedding-2"]


def test_one_agents_query_does_not_warm_another_agents_cache(fake_llm, redis_client):
    """Issue 44, item 3: a shared cache answered another agent's recent query in half the time of a fresh one;
    the entry is the agent's own, so the second agent's identical query costs the same model call as any."""
    clients = [Client(HTTP_AUTHORIZATION=f"Bearer {make_agent()[1]}") for _ in range(2)]
    make_completed_item(content="GPU hours in Frankfurt", embedding=unit(1.0))
    assert search(clients[0], "acquire competitor quietly").status_code == 200
    assert search(clients[1], "acquire competitor quietly").status_code == 200
    assert fake_llm.count("embed") == 2  # the second agent's query was not answered from the first's entry
    assert len(redis_client.keys("search:embedding:*")) == 2
    assert search(clients[1], "acquire competitor quietly").status_code == 200
    assert fake_llm.count("embed") == 2  # an agent's own repeat is cached


def test_semantic_searches_have_their_own_rate_bucket(fake_llm, settings):
    settings.RATE_LIMIT_SEARCH_EMBEDDINGS_PER_MINUTE = 3
    _, token = make_agent()
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    assert search(client, "first").status_code == 200
    assert search(client, "second", mode="hybrid").status_code == 200
    assert search(client, "first").status_code == 200  # cached, but counted all the same
    limited = search(client, "third")
    assert limited.status_code == 429
    assert int(limited["Retry-After"]) >= 1
    assert limited.json()["error"]["code"] == "rate_limited"
    assert "too many semantic searches" in limited.json()["error"]["message"]
    assert fake_llm.count("embed") == 2  # the refused search made no model call
    # Keyword mode and other agents are not limited by this bucket.
    assert search(client, "third", mode="keyword").status_code == 200
    _, other = make_agent()
    assert search(Client(HTTP_AUTHORIZATION=f"Bearer {other}"), "third").status_code == 200
    assert fake_llm.count("embed") == 3


def test_a_full_bucket_refuses_a_query_another_agent_cached_like_a_fresh_one(fake_llm, settings):
    """Were a cached query free, a 200 where a fresh one answers 429 would tell an agent what is cached. The cache
    is per agent now (test_one_agents_query_does_not_warm_another_agents_cache); the limit stays blind to it."""
    settings.RATE_LIMIT_SEARCH_EMBEDDINGS_PER_MINUTE = 1
    _, spied_on = make_agent()
    assert search(Client(HTTP_AUTHORIZATION=f"Bearer {spied_on}"), "acquire competitor quietly").status_code == 200
    _, token = make_agent()
    prober = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    assert search(prober, "anything at all").status_code == 200  # the prober's one search this minute
    cached = search(prober, "acquire competitor quietly")
    fresh = search(prober, "never searched before")
    assert (cached.status_code, fresh.status_code) == (429, 429)
    assert cached.json()["error"]["code"] == fresh.json()["error"]["code"] == "rate_limited"
    assert abs(int(cached["Retry-After"]) - int(fresh["Retry-After"])) <= 1  # the same window's TTL
    for mode in ("semantic", "hybrid"):
        assert search(prober, "acquire competitor quietly", mode=mode).status_code == 429
    assert fake_llm.count("embed") == 2
