"""items.ports: the one point where the pipeline plugs its answers into items, connected once at start-up."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from items import ports
from items.models import ItemStatus, ProcessedItem
from items.search import embed_query
from items.services.moderation import claim_is_dead


@pytest.fixture
def restore_ports():
    before = ports.connected()
    yield
    ports.connect(
        query_embedder=before.query_embedder,
        claim_holder_gone=before.claim_holder_gone,
        suggestion_requester=before.suggestion_requester,
        waiting_reason=before.waiting_reason,
    )


def test_the_pipeline_app_connects_every_port_at_start_up():
    from pipeline.apps import _query_embedding
    from pipeline.consumers.item_publish import claim_holder_gone
    from pipeline.llm.reachability import model_degraded
    from pipeline.suggestions import item_suggestion_enqueue

    assert ports.connected() == ports.Ports(
        query_embedder=_query_embedding,
        claim_holder_gone=claim_holder_gone,
        suggestion_requester=item_suggestion_enqueue,
        waiting_reason=model_degraded,
    )


def test_search_embeds_queries_through_the_connected_port(restore_ports):
    vector = ports.QueryVector(values=[1.0, 0.0], min_similarity=0.5)
    ports.connect(query_embedder=lambda text: vector, claim_holder_gone=None, suggestion_requester=None)
    assert embed_query("rust jobs") is vector

    ports.connect(query_embedder=None, claim_holder_gone=None, suggestion_requester=None)
    with pytest.raises(ports.SemanticSearchUnavailable, match="no query embedder"):
        embed_query("rust jobs")


def test_a_live_claim_is_dead_only_when_the_connected_check_says_its_holder_is_gone(restore_ports):
    item = ProcessedItem(
        status=ItemStatus.PROCESSING, claimed_by="claim-1", lease_expires_at=timezone.now() + timedelta(minutes=5)
    )
    ports.connect(query_embedder=None, claim_holder_gone=None, suggestion_requester=None)
    assert not claim_is_dead(item)
    ports.connect(query_embedder=None, claim_holder_gone=lambda token: token == "claim-1", suggestion_requester=None)
    assert claim_is_dead(item)
    ports.connect(query_embedder=None, claim_holder_gone=lambda token: False, suggestion_requester=None)
    assert not claim_is_dead(item)
