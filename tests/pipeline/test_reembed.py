"""`manage.py reembed_items` moves stored vectors into the configured model's space."""

import io

import numpy as np
import pytest
from django.core.management import call_command

from items.models import ProcessedItem
from pipeline.llm.local import hashing
from pipeline.llm.local.embedding import embed_texts
from tests.factories import make_completed_item

pytestmark = pytest.mark.django_db


def test_reembed_items_replaces_old_vectors_with_the_configured_model(settings):
    settings.LLM_PROVIDER = "local"
    settings.LOCAL_EMBEDDING = "minilm"
    texts = ["Offering spare A100 GPUs in Frankfurt.", "上海静安区共享办公工位出租。"]
    items = [make_completed_item(content=text, embedding=hashing.embed_text(text, 384)) for text in texts]
    pending = make_completed_item(content="no vector yet")  # nothing to replace: left alone
    # A discarded item's embedding checkpoint (unindexed, kept for a requeue) moves into the new space too.
    checkpoint = make_completed_item(content=texts[0], status="discarded")
    ProcessedItem.objects.filter(pk=checkpoint.pk).update(pending_embedding=hashing.embed_text(texts[0], 384))
    call_command("reembed_items", "--batch", "1", stdout=io.StringIO())
    expected = embed_texts(texts, 384)
    for entry, vector in zip(items, expected, strict=True):
        stored = np.asarray(ProcessedItem.objects.get(pk=entry.pk).embedding)
        assert np.allclose(stored, vector, atol=1e-6)
        assert entry.group_id == ProcessedItem.objects.get(pk=entry.pk).group_id
    assert ProcessedItem.objects.get(pk=pending.pk).embedding is None
    moved = ProcessedItem.objects.get(pk=checkpoint.pk)
    assert moved.embedding is None and np.allclose(np.asarray(moved.pending_embedding), expected[0], atol=1e-6)
