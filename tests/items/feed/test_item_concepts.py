"""Stored lexicon concepts (ProcessedItem.concepts): `manage.py feed_concepts` fills the items that have none, and
with --all recomputes every completed item's (after the lexicon changed)."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from items.feed_ranking.concepts import item_concepts
from items.models import ItemStatus, ProcessedItem
from items.services.item_concepts import item_concepts_refresh
from tests.items.feed.conftest import item

pytestmark = pytest.mark.django_db


def test_the_command_fills_missing_concepts_and_all_recomputes_every_completed_item(author):
    missing = item(author, content="Spare GPU capacity for rent by the hour", concepts=None)
    stale = item(author, content="台风预警：明天停课", keywords=["typhoon"], concepts=[1])
    pending = item(author, content="GPU for rent", concepts=None)
    ProcessedItem.objects.filter(pk=pending.pk).update(status=ItemStatus.PENDING)
    out = StringIO()
    call_command("feed_concepts", stdout=out)
    assert "1 items' concepts stored" in out.getvalue()
    rows = dict(ProcessedItem.objects.values_list("pk", "concepts"))
    assert rows[missing.pk] == item_concepts(missing.raw.content, []) and rows[missing.pk]
    assert rows[stale.pk] == [1]  # it had some: left alone
    assert rows[pending.pk] is None  # not completed: stored when it completes
    call_command("feed_concepts", "--all", stdout=StringIO())
    assert ProcessedItem.objects.get(pk=stale.pk).concepts == item_concepts(stale.raw.content, ["typhoon"]) != [1]


def test_batches_cover_every_row_and_a_bad_batch_is_refused(author):
    made = [item(author, content=f"GPU hours {n} for rent", concepts=None) for n in range(5)]
    assert item_concepts_refresh(batch=2) == 5
    assert all(
        concepts
        for concepts in ProcessedItem.objects.filter(pk__in=[m.pk for m in made]).values_list("concepts", flat=True)
    )
    with pytest.raises(ValueError, match="batch"):
        item_concepts_refresh(batch=0)
