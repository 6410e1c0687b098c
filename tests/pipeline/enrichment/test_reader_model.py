"""The reader model (docs/feed.md#reader-model): the profile consumer embeds seeks and offers separately, each
clause of a side with several wants too, from the profile version it read; an older version never wins."""

from __future__ import annotations

import json
from datetime import timedelta

import numpy as np
import pytest
from django.test import Client

from items.feed_ranking.clauses import clauses
from items.models import ReaderProfile
from items.services.profiles import agent_reader_vectors_set
from tests.factories import make_agent
from tests.fakes.openai_server import hashed_embedding
from tests.pipeline.enrichment.test_profile_keyword_bounds import burst


def test_clauses_cut_several_wants_and_keep_a_single_one_whole():
    assert clauses("Rented GPU hours by the hour, and a startup lawyer for contracts.") == [
        "Rented GPU hours by the hour",
        "a startup lawyer for contracts",
    ]
    assert clauses("可以短期合作的机器学习工程师，以及价格便宜的大模型推理 API 服务。") == [
        "可以短期合作的机器学习工程师",
        "价格便宜的大模型推理 API 服务",
    ]
    assert clauses("A video editor for weekly episodes") == []
    assert len(clauses("; ".join(f"want number {n} of many" for n in range(9)))) == 4


def test_the_profile_consumer_embeds_seeks_and_offers_separately(run_pipeline, fake_llm, settings):
    agent, token = make_agent()
    seeks = "Rented GPU hours by the hour, and a startup lawyer for contracts."
    profile = {"bio": "Ten years in robotics.", "offers": "Rust development on contract", "seeks": seeks}
    response = Client(HTTP_AUTHORIZATION=f"Bearer {token}").put(
        "/api/v1/agents/me", data=json.dumps(profile), content_type="application/json"
    )
    assert response.status_code == 200
    burst(run_pipeline, fake_llm)
    agent.refresh_from_db()
    reader = ReaderProfile.objects.get(agent=agent)
    dimensions = settings.EMBEDDING_DIMENSIONS

    def close(stored, text: str) -> bool:
        expected = np.asarray(hashed_embedding(text, dimensions))
        return bool(np.allclose(np.asarray(stored), expected, atol=1e-5))

    assert close(reader.seeks_embedding, seeks)
    assert close(reader.offers_embedding, profile["offers"])
    assert [close(part, text) for part, text in zip(reader.seeks_parts, clauses(seeks), strict=True)] == [True, True]
    assert reader.offers_parts == []
    assert reader.version == agent.updated_at
    assert reader.embedding_model == "openai:fake-embedding:384"  # stamped with the model that made the vectors


@pytest.mark.django_db
def test_an_older_profile_version_never_overwrites_a_newer_one(settings):
    agent, _ = make_agent()
    vector = [1.0] + [0.0] * (settings.EMBEDDING_DIMENSIONS - 1)
    assert agent_reader_vectors_set(agent_id=agent.pk, seeks=vector, offers=None, version=agent.updated_at, model="m")
    older = agent.updated_at - timedelta(seconds=5)
    assert not agent_reader_vectors_set(agent_id=agent.pk, seeks=None, offers=vector, version=older, model="m")
    assert ReaderProfile.objects.get(agent=agent).offers_embedding is None
