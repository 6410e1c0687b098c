"""The embedding checkpoint is kept out of the HNSW graphs until the item completes (items.models,
ProcessedItem.pending_embedding; docs/performance.md): the graphs get one entry per completed item, not one
for the checkpoint and another for the completion's row version. Held, discarded and failed items keep the
vector unindexed, so an approval or a requeue still pays for no embedding twice."""

from __future__ import annotations

import numpy as np
import pytest
from django.contrib.auth import get_user_model

from items.models import ItemStatus, ProcessedItem
from items.selectors import most_similar
from items.services.moderation import item_review_approve
from pipeline.consumers.item_publish import ItemPublishConsumer
from pipeline.runtime.event import Lease
from tests.factories import make_item
from tests.fakes.openai_server import DEFAULT_REPLIES
from tests.pipeline.enrichment.conftest import publish_entry

pytestmark = pytest.mark.django_db(transaction=True)


def run_once(pk: int) -> ProcessedItem:
    ItemPublishConsumer().handle(publish_entry(pk, Lease()))
    return ProcessedItem.objects.get(pk=pk)


def test_a_completed_item_has_its_vector_in_the_indexed_column_only(fake_llm):
    item = run_once(make_item(content="Offering two spare A100 GPUs in Frankfurt this weekend.").pk)
    assert item.status == ItemStatus.COMPLETED
    assert item.embedding is not None and item.pending_embedding is None
    assert most_similar(embedding=list(item.embedding), exclude_id=-1).item_id == item.pk


def test_a_discarded_item_keeps_its_vector_unindexed(fake_llm):
    fake_llm.script("safety", {"safe": False, "flag": "fraud", "reason": "Asks for money up front."})
    item = run_once(make_item(content="Send 1 BTC now and receive 2 BTC back within the hour.").pk)
    assert item.status == ItemStatus.DISCARDED
    assert item.embedding is None and item.pending_embedding is not None
    assert most_similar(embedding=list(item.pending_embedding), exclude_id=-1) is None


def test_a_held_item_enters_the_index_when_a_moderator_publishes_it(fake_llm, settings):
    settings.REVIEW_SAFETY_RISK = 0.35
    fake_llm.script("safety", {**DEFAULT_REPLIES["safety"], "risk": 0.6})
    item = run_once(make_item(content="A friendly investment club: returns shared weekly, join today.").pk)
    assert item.status == ItemStatus.REVIEW
    assert item.embedding is None and item.pending_embedding is not None
    vector = np.asarray(item.pending_embedding)

    moderator = get_user_model().objects.create_user(username="mod-pending", is_staff=True)
    item = item_review_approve(item=item, moderator=moderator)
    assert item.status == ItemStatus.COMPLETED and item.pending_embedding is None
    assert np.allclose(np.asarray(item.embedding), vector)
    assert most_similar(embedding=vector.tolist(), exclude_id=-1).item_id == item.pk
    assert fake_llm.count("embed") == 1
