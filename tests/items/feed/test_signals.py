"""Each ranking signal changes the order it should, and stops changing it when its weight is 0
(docs/feed.md#signals). In every test the item the signal favours is the older one, so without the signal
freshness puts the other first."""

from __future__ import annotations

import pytest
from django.utils import timezone

from items.models import FeedEvent, ItemFeedback, ItemStats, ItemStatus, ProcessedItem
from tests.items.feed.conftest import basis, item, ranked, reader_with

pytestmark = pytest.mark.django_db


def test_match_puts_a_supply_of_what_the_reader_seeks_first(author, settings):
    reader = reader_with(seeks_vector=basis(0), offers_vector=basis(1))
    wanted = item(author, broadcast_type="supply", embedding=basis(0))
    other = item(author, broadcast_type="supply", embedding=basis(2))
    assert ranked(reader) == [wanted.pk, other.pk]
    settings.FEED_WEIGHT_MATCH = 0.0
    assert ranked(reader) == [other.pk, wanted.pk]


def test_match_reads_a_demand_against_what_the_reader_offers(author, settings):
    reader = reader_with(seeks_vector=basis(0), offers_vector=basis(1))
    fulfillable = item(author, broadcast_type="demand", embedding=basis(1))
    peer = item(author, broadcast_type="demand", embedding=basis(0))  # wants what the reader wants
    settings.FEED_WEIGHT_COMPETITION = 0.0
    assert ranked(reader) == [fulfillable.pk, peer.pk]
    settings.FEED_WEIGHT_MATCH = 0.0
    assert ranked(reader) == [peer.pk, fulfillable.pk]


def test_concepts_match_across_languages(author, settings):
    reader = reader_with(seeks="租用显卡，按小时计费")
    gpu = item(author, content="Spare GPU capacity for rent by the hour", broadcast_type="supply")
    bike = item(author, content="A bike for sale in Lisbon", broadcast_type="supply")
    assert ranked(reader) == [gpu.pk, bike.pk]
    settings.FEED_WEIGHT_CONCEPTS = 0.0
    assert ranked(reader) == [bike.pk, gpu.pk]


def test_competition_puts_a_supply_of_what_the_reader_offers_last(author, settings):
    reader = reader_with(seeks_vector=basis(0), offers_vector=basis(1))
    unrelated = item(author, broadcast_type="supply", embedding=basis(2))
    competitor = item(author, broadcast_type="supply", embedding=basis(1))
    assert ranked(reader) == [unrelated.pk, competitor.pk]
    settings.FEED_WEIGHT_COMPETITION = 0.0
    assert ranked(reader) == [competitor.pk, unrelated.pk]


def test_overlap_of_profile_keywords(author, settings):
    reader = reader_with(profile_keywords=["gpu"])
    shared = item(author, keywords=["gpu"])
    other = item(author, keywords=["bike"])
    assert ranked(reader) == [shared.pk, other.pk]
    settings.FEED_WEIGHT_OVERLAP = 0.0
    assert ranked(reader) == [other.pk, shared.pk]


def test_quality_pushes_a_vague_item_down(author, settings):
    settings.FEED_MIN_QUALITY = 0.0  # the signal alone (the floor has a test of its own)
    reader = reader_with()
    concrete = item(author, quality=0.9)
    vague = item(author, quality=0.2)
    assert ranked(reader) == [concrete.pk, vague.pk]
    settings.FEED_WEIGHT_QUALITY = 0.0
    assert ranked(reader) == [vague.pk, concrete.pk]


def test_freshness_fades_alerts_fast(author, settings):
    reader = reader_with()
    old_alert = item(author, broadcast_type="alert", quality=0.8, hours_old=48)
    new_alert = item(author, broadcast_type="alert", quality=0.7)
    assert ranked(reader) == [new_alert.pk, old_alert.pk]
    settings.FEED_WEIGHT_FRESHNESS = 0.0
    assert ranked(reader) == [old_alert.pk, new_alert.pk]


def test_item_feedback_smoothed_mean(author, settings):
    reader = reader_with()
    liked = item(author)
    unscored = item(author)
    ItemStats.objects.create(item=liked, readers=10, score_sum=20)
    assert ranked(reader) == [liked.pk, unscored.pk]
    settings.FEED_WEIGHT_FEEDBACK = 0.0
    assert ranked(reader) == [unscored.pk, liked.pk]


def test_own_feedback_raises_items_like_a_plus_two(author, settings):
    reader = reader_with()
    scored = item(author, embedding=basis(5), hours_old=100)
    ItemFeedback.objects.create(reader=reader, item=scored, score=2, event_id="e1")
    like_it = item(author, embedding=basis(5, 6))
    unlike = item(author, embedding=basis(7))
    order = ranked(reader)
    assert order.index(like_it.pk) < order.index(unlike.pk)
    settings.FEED_WEIGHT_OWN_FEEDBACK = 0.0
    order = ranked(reader)
    assert order.index(unlike.pk) < order.index(like_it.pk)


def test_own_feedback_lowers_items_like_a_minus_one_and_feed_events_count_as_interest(author, settings):
    reader = reader_with()
    disliked = item(author, embedding=basis(5), hours_old=100)
    ItemFeedback.objects.create(reader=reader, item=disliked, score=-1, event_id="e1")
    asked = item(author, embedding=basis(8), hours_old=100)
    FeedEvent.objects.create(agent=reader, item_id=asked.pk, kind="task", dedup_key="d1")
    like_the_task = item(author, embedding=basis(8, 9), hours_old=1)
    like_the_spam = item(author, embedding=basis(5, 6))
    order = ranked(reader)
    assert order.index(like_the_task.pk) < order.index(like_the_spam.pk)
    assert order[-1] == disliked.pk
    settings.FEED_WEIGHT_OWN_FEEDBACK = 0.0
    order = ranked(reader)
    assert order.index(like_the_spam.pk) < order.index(like_the_task.pk)


def test_feed_events_on_an_item_since_held_count_no_more(author):
    """Issue 44, item 8: an event's item embedding feeds the reader's ranking only while the reader may see it."""
    reader = reader_with()
    asked = item(author, embedding=basis(8), hours_old=100)
    FeedEvent.objects.create(agent=reader, item_id=asked.pk, kind="task", dedup_key="d1")
    like_the_task = item(author, embedding=basis(8, 9), hours_old=1)
    other = item(author, embedding=basis(7))
    order = ranked(reader)
    assert order.index(like_the_task.pk) < order.index(other.pk)
    ProcessedItem.objects.filter(pk=asked.pk).update(status=ItemStatus.REVIEW)
    order = ranked(reader)
    assert order.index(other.pk) < order.index(like_the_task.pk)


def test_neighbours_items_scored_well_by_readers_with_similar_profiles(author, settings):
    reader = reader_with(seeks_vector=basis(0))
    neighbour = reader_with(seeks_vector=basis(0, 1))
    liked = item(author, embedding=basis(9))
    other = item(author, embedding=basis(9))
    ItemFeedback.objects.create(reader=neighbour, item=liked, score=2, event_id="e1")
    assert ranked(reader) == [liked.pk, other.pk]
    settings.FEED_WEIGHT_NEIGHBOURS = 0.0
    assert ranked(reader) == [other.pk, liked.pk]


def test_trending_decayed_engagement(author, settings):
    reader = reader_with()
    busy = item(author)
    quiet = item(author)
    ItemStats.objects.create(item=busy, consumed=200, score_one=5)
    assert ranked(reader) == [busy.pk, quiet.pk]
    settings.FEED_WEIGHT_TRENDING = 0.0
    assert ranked(reader) == [quiet.pk, busy.pk]
    settings.FEED_WEIGHT_TRENDING = 1.0
    ItemStats.objects.filter(item=busy).update(updated_at=timezone.now() - timezone.timedelta(days=30))
    assert ranked(reader) == [quiet.pk, busy.pk]  # decayed away (and no longer a trending candidate)


def test_official_items_by_their_own_rule(author, settings):
    from pipeline.official import official_agent

    reader = reader_with()
    announcement = item(official_agent())
    ordinary = item(author)
    assert ranked(reader) == [announcement.pk, ordinary.pk]
    settings.FEED_OFFICIAL_HOURS = 0.0  # the rule's window closed: an ordinary item
    assert ranked(reader) == [ordinary.pk, announcement.pk]


def test_concepts_of_an_item_stored_without_them_are_read_from_its_text(author, settings):
    reader = reader_with(seeks="租用显卡，按小时计费")
    gpu = item(author, content="Spare GPU capacity for rent by the hour", broadcast_type="supply", concepts=None)
    bike = item(author, content="A bike for sale in Lisbon", broadcast_type="supply", concepts=None)
    assert ranked(reader) == [gpu.pk, bike.pk]
    settings.FEED_WEIGHT_CONCEPTS = 0.0
    assert ranked(reader) == [bike.pk, gpu.pk]
