"""Semantic search's two floors (docs/search.md#the-answer-floor-and-the-tail-floor): a query is answered only when
its nearest item reaches the answer floor, and then the items down to the lower tail floor are kept (e5 places an
answer in another language lower than one in the query's own)."""

import base64
import math

import pytest
from django.test import Client

from items import query_embeddings
from items.ports import QueryVector
from items.search import similarity_floors
from items.semantic_search import semantic_candidates
from pipeline.llm.embeddings import SEMANTIC_FLOORS, semantic_floor, semantic_tail_floor
from tests.factories import make_agent, make_completed_item
from tests.pipeline.enrichment.conftest import at_cosine, unit

pytestmark = pytest.mark.django_db


def found(query: list[float], *, floor: float, tail: float | None) -> list[int]:
    rows = semantic_candidates(
        embedding=query, min_similarity=floor, tail_similarity=tail, broadcast_type=None, domain=None, depth=10
    )
    return [pk for pk, _ in rows]


def test_once_the_nearest_item_clears_the_floor_the_tail_down_to_the_lower_floor_is_kept():
    near = make_completed_item(content="near", embedding=at_cosine(0.9))
    low = make_completed_item(content="low", embedding=at_cosine(0.2))
    make_completed_item(content="unrelated", embedding=at_cosine(0.05))
    assert found(unit(1.0), floor=0.3, tail=0.1) == [near.pk, low.pk]
    assert found(unit(1.0), floor=0.3, tail=None) == [near.pk]  # one floor, as before


def test_a_query_whose_nearest_item_is_below_the_floor_has_no_answer_whatever_the_tail():
    make_completed_item(content="low", embedding=at_cosine(0.25))
    make_completed_item(content="lower", embedding=at_cosine(0.2))
    assert found(unit(1.0), floor=0.3, tail=0.1) == []


def test_a_filtered_search_keeps_its_tail_on_the_exact_path():
    near = make_completed_item(content="near", embedding=at_cosine(0.9), broadcast_type="supply")
    low = make_completed_item(content="low", embedding=at_cosine(0.2), broadcast_type="supply")
    make_completed_item(content="other type", embedding=at_cosine(0.95), broadcast_type="demand")
    rows = semantic_candidates(
        embedding=unit(1.0), min_similarity=0.3, tail_similarity=0.1, broadcast_type="supply", domain=None, depth=10
    )
    assert [pk for pk, _ in rows] == [near.pk, low.pk]
    alone = semantic_candidates(
        embedding=unit(1.0), min_similarity=0.95, tail_similarity=0.1, broadcast_type="supply", domain=None, depth=10
    )
    assert alone == []  # the supply items' nearest (0.9) is below the answer floor


def test_a_tail_floor_above_the_answer_floor_is_read_as_the_answer_floor():
    near = make_completed_item(content="near", embedding=at_cosine(0.9))
    middle = make_completed_item(content="middle", embedding=at_cosine(0.4))
    assert found(unit(1.0), floor=0.3, tail=0.8) == [near.pk, middle.pk]


def test_the_tail_floor_is_a_setting_of_the_search_api(fake_llm, settings):
    _, token = make_agent()
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    near = make_completed_item(content="GPU hours in Frankfurt", embedding=at_cosine(0.9))
    low = make_completed_item(content="線形代数の家庭教師", embedding=at_cosine(0.2))
    fake_llm.set_embedding("gpu rental", unit(1.0))

    def semantic() -> list[int]:
        response = client.get("/api/v1/search", {"q": "gpu rental", "mode": "semantic"})
        assert response.status_code == 200, response.content
        return [int(entry["item_id"]) for entry in response.json()["items"]]

    assert semantic() == [near.pk]  # a remote model has one floor (0.25)
    settings.SEARCH_TAIL_SIMILARITY = 0.1
    assert semantic() == [near.pk, low.pk]
    settings.SEARCH_MIN_SIMILARITY = 0.95  # nothing reaches the answer floor: no answer, whatever the tail
    assert semantic() == []


def test_e5_has_a_tail_floor_below_its_answer_floor_and_other_models_one_floor(settings):
    settings.LLM_PROVIDER = "local"
    settings.LOCAL_EMBEDDING = "e5"
    assert semantic_tail_floor() < semantic_floor() == SEMANTIC_FLOORS["local:e5"]
    settings.LOCAL_EMBEDDING = "minilm"
    assert semantic_tail_floor() == semantic_floor()


@pytest.mark.parametrize(
    ("configured", "configured_tail", "expected"),
    [
        (None, None, (0.225, 0.15)),  # the model's two floors
        (0.4, None, (0.4, 0.4)),  # SEARCH_MIN_SIMILARITY alone: a single cut, as before the tail existed
        (0.4, 0.1, (0.4, 0.1)),
        (None, 0.1, (0.225, 0.1)),
        (0.2, 0.3, (0.2, 0.2)),  # a tail above the answer floor is the answer floor
    ],
)
def test_the_floors_settings(settings, configured, configured_tail, expected):
    settings.SEARCH_MIN_SIMILARITY, settings.SEARCH_TAIL_SIMILARITY = configured, configured_tail
    vector = QueryVector(values=[1.0], min_similarity=0.225, tail_similarity=0.15)
    assert similarity_floors(vector) == pytest.approx(expected)


@pytest.mark.parametrize("tail", [0.15, None])
def test_a_cached_query_vector_keeps_both_floors_exactly(settings, tail):
    settings.EMBEDDING_DIMENSIONS = 2
    vector = QueryVector(values=[0.5, -0.25], min_similarity=0.225, tail_similarity=tail)
    assert query_embeddings._unpack(query_embeddings._pack(vector)) == vector  # floors as float64: no rounding


@pytest.mark.parametrize(
    "raw",
    [
        "not base64 at all!",
        base64.b64encode(b"short").decode(),
        query_embeddings._pack(QueryVector(values=[0.5, 0.5, 0.5], min_similarity=0.2)),  # another width
        query_embeddings._pack(QueryVector(values=[0.5, 0.5], min_similarity=math.nan)),  # no answer floor
        query_embeddings._pack(QueryVector(values=[0.5, math.inf], min_similarity=0.2)),
    ],
)
def test_a_cache_entry_that_is_not_a_vector_of_this_space_is_a_miss(settings, raw):
    settings.EMBEDDING_DIMENSIONS = 2
    assert query_embeddings._unpack(raw) is None


def test_the_query_cache_is_keyed_by_the_embedding_space(settings, monkeypatch):
    """A query vector of e5's first space must not be read back in e5.2 (or by a process of the other version)."""
    from eigenflux.base import embedding_space

    settings.LLM_PROVIDER, settings.LOCAL_EMBEDDING = "local", "e5"
    current = query_embeddings.cache_key("gpu rental", agent_id=1)
    monkeypatch.setattr(embedding_space, "LOCAL_SPACES", {})  # the centred space's id, local:e5:384
    assert query_embeddings.cache_key("gpu rental", agent_id=1) != current


@pytest.mark.parametrize("raw", ["nan", "inf", "-inf"])
def test_a_floor_setting_that_is_not_a_finite_number_is_refused(monkeypatch, raw):
    """NaN compares false with everything: as the answer floor it would answer every query, as the tail none."""
    from django.core.exceptions import ImproperlyConfigured

    from eigenflux.base.environ import env_optional_float

    monkeypatch.setenv("SEARCH_TAIL_SIMILARITY", raw)
    with pytest.raises(ImproperlyConfigured, match="SEARCH_TAIL_SIMILARITY must be a finite number"):
        env_optional_float("SEARCH_TAIL_SIMILARITY", minimum=-1.0, maximum=1.0)
