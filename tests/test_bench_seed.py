"""bench/seed.py on real PostgreSQL, at a tiny scale: every table it promises is filled by COPY, the filters of
known selectivity are there, and every index the models define exists again after the load."""

from __future__ import annotations

import pytest
from django.db import connection

from bench import seed as seeder
from items.models import (
    Agent,
    FeedDelivery,
    FeedEvent,
    FeedImpression,
    ItemFeedback,
    ItemStats,
    ProcessedItem,
    ReaderProfile,
)


@pytest.mark.django_db(transaction=True)  # the seeder drops and builds indexes and vacuums: no test transaction
def test_a_tiny_network_is_seeded_with_its_history_and_every_index(settings, monkeypatch):
    settings.LLM_PROVIDER = "local"
    settings.LOCAL_EMBEDDING = "hashing"  # the seeder embeds the corpus once; the model does not matter here
    monkeypatch.setitem(seeder.SCALES, "tiny", (1000, 20))
    phases = seeder.seed("tiny")
    assert phases["total"] > 0
    assert ProcessedItem.objects.filter(status="completed", search_vector__isnull=False).count() == 1000
    assert ProcessedItem.objects.filter(embedding__isnull=False).count() == 1000
    assert ReaderProfile.objects.count() == Agent.objects.filter(name__startswith="seedbench-").count() == 20
    assert (
        ItemFeedback.objects.count() > 20 * 3 and 20 * 3 < FeedEvent.objects.count() <= 20 * 5
    )  # few items a text here
    assert FeedDelivery.objects.count() > 20 * 20 and FeedImpression.objects.count() == 20 * 40
    assert 400 < ItemStats.objects.count() < 800
    assert 200 < ProcessedItem.objects.filter(domains__contains=["tag-30"]).count() < 400
    assert ProcessedItem.objects.filter(lang="de").count() < 80
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexname FROM pg_indexes")
        present = {row[0] for row in cursor.fetchall()}
    wanted = {index.name for model, index in seeder.rebuilt_indexes([ProcessedItem, ReaderProfile, FeedImpression])}
    assert wanted <= present


@pytest.mark.django_db
def test_a_kept_network_of_another_embedding_space_is_refused_by_name():
    """bench/seed.py require_space: a network seeded before a change of model or space would be measured with none of
    its vectors visible to search and the feed; the benches that reuse one stop instead, naming what to do."""
    from tests.factories import make_agent, make_completed_item
    from tests.pipeline.enrichment.conftest import unit

    item = make_completed_item(make_agent()[0], "GPU hours", embedding=unit(1.0))
    seeder.require_space("seed it again")  # the configured space's vectors: nothing to say
    ProcessedItem.objects.filter(pk=item.pk).update(embedding_model="local:e5:384")
    with pytest.raises(SystemExit, match=r"local:e5:384's, the configured model makes .*: seed it again"):
        seeder.require_space("seed it again")
