"""The candidate reads (items.feed_ranking.candidates and context): the filters hold on every source, a
ranking costs a bounded number of round trips whatever the number of candidates, and what similar readers liked
is kept per profile version."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from items.feed_ranking import rank_entries
from items.models import ItemFeedback, ProcessedItem, ReaderProfile
from items.ranker.serving import active_model
from tests.factories import make_agent
from tests.items.feed.conftest import basis, item, ranked, reader_with

pytestmark = pytest.mark.django_db


def test_type_and_domain_filters_hold_on_every_source(author):
    reader = reader_with(seeks_vector=basis(0), offers_vector=basis(1))
    supply = item(author, broadcast_type="supply", domains=["compute"], embedding=basis(0))
    demand = item(author, broadcast_type="demand", domains=["compute"], embedding=basis(1))
    other_domain = item(author, broadcast_type="supply", domains=["travel"], embedding=basis(0))
    assert set(ranked(reader, broadcast_type="supply")) == {supply.pk, other_domain.pk}
    assert set(ranked(reader, domain="compute")) == {supply.pk, demand.pk}
    assert ranked(reader, broadcast_type="demand", domain="compute") == [demand.pk]


def test_expired_items_are_never_candidates(author):
    reader = reader_with(seeks_vector=basis(0))
    alert = item(author, broadcast_type="alert", embedding=basis(0))
    ProcessedItem.objects.filter(pk=alert.pk).update(expire_time=timezone.now() - timedelta(minutes=1))
    fresh = item(author, broadcast_type="alert", embedding=basis(0))
    assert ranked(reader) == [fresh.pk]


def test_a_ranking_costs_the_same_few_round_trips_however_many_candidates(author, settings):
    """Reader, judgments, similar readers, candidates narrowed with their facts (one statement for every source):
    a fixed number of queries, not one per source, clause, type or candidate."""
    settings.FEED_RANKER_CHECK_SECONDS = 3600
    settings.FEED_NEIGHBOURS_CACHE_SECONDS = 0  # the similar readers' query every time (it is kept otherwise)
    reader = reader_with(seeks_vector=basis(0), offers_vector=basis(1))
    neighbour = reader_with(seeks_vector=basis(0))

    active_model()  # which ranker model is active: one query per FEED_RANKER_CHECK_SECONDS, not per ranking

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            entries = rank_entries(reader=reader, page_size=10, depth=50)
        assert entries
        return len([q for q in captured.captured_queries if "SAVEPOINT" not in q["sql"]])

    first = item(author, broadcast_type="supply", embedding=basis(0))
    ItemFeedback.objects.create(reader=neighbour, item=first, score=2, event_id="e1")
    ItemFeedback.objects.create(reader=reader, item=first, score=1, event_id="e2")
    few = queries()
    others = [make_agent()[0] for _ in range(3)]
    for n in range(30):
        item(others[n % 3], broadcast_type=("supply", "demand", "info", "alert")[n % 4], embedding=basis(n % 5))
    assert queries() == few <= 6


def test_what_similar_readers_liked_is_kept_per_profile_version(author, settings):
    reader = reader_with(seeks_vector=basis(0))
    neighbour = reader_with(seeks_vector=basis(0, 1))
    liked = item(author, embedding=basis(9))
    other = item(author, embedding=basis(9))
    assert ranked(reader) == [other.pk, liked.pk]  # nobody liked either: the newer first
    ItemFeedback.objects.create(reader=neighbour, item=liked, score=2, event_id="e1")
    assert ranked(reader) == [other.pk, liked.pk]  # kept (FEED_NEIGHBOURS_CACHE_SECONDS)
    ReaderProfile.objects.filter(agent=reader).update(version=timezone.now())
    assert ranked(reader) == [liked.pk, other.pk]  # a new profile version reads them afresh
    ItemFeedback.objects.filter(reader=neighbour).delete()
    settings.FEED_NEIGHBOURS_CACHE_SECONDS = 0
    assert ranked(reader) == [other.pk, liked.pk]  # not kept: read at every ranking
