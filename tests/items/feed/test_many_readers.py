"""One item scored for many readers at once (items.feed_ranking.scores_for_readers, what a match push runs): the
same scores as one reader at a time, for a fixed number of queries whatever the number of readers."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from items.feed_ranking import score_for_reader, scores_for_readers
from items.models import FeedEvent, ItemFeedback
from tests.items.feed.conftest import basis, item, reader_with

pytestmark = pytest.mark.django_db


def _readers(author, count: int) -> list:
    readers = []
    for n in range(count):
        reader = reader_with(seeks_vector=basis(n % 3), offers_vector=basis(10 + n % 2), seeks="GPU hours to rent")
        judged = item(author, embedding=basis(n % 3, 20), hours_old=50)
        ItemFeedback.objects.create(reader=reader, item=judged, score=(2, -1)[n % 2], event_id=f"s{n}")
        FeedEvent.objects.create(agent=reader, item_id=judged.pk, kind="task", dedup_key=f"d{n}")
        readers.append(reader)
    return readers


def test_many_readers_score_as_each_alone_for_the_same_few_queries(author, settings):
    settings.FEED_NEIGHBOURS_CACHE_SECONDS = 0
    new = item(author, broadcast_type="supply", content="Spare GPU hours for rent", embedding=basis(0, 20))

    def queries(readers) -> int:
        with CaptureQueriesContext(connection) as captured:
            scores_for_readers(readers=readers, item=new)
        return len(captured.captured_queries)

    few, many = _readers(author, 2), _readers(author, 8)
    assert queries(few) == queries(many) <= 4  # the item, the profiles, every reader's judgments (+ neighbours?)
    together = {reader.pk: ranked for reader, ranked in scores_for_readers(readers=many, item=new)}
    for reader in many:
        alone = score_for_reader(reader=reader, item=new)
        assert together[reader.pk].score == pytest.approx(alone.score, abs=1e-6)  # float32 cosines
        assert together[reader.pk].parts == pytest.approx(alone.parts, abs=1e-6)
    assert {round(ranked.parts["own_feedback"], 6) for ranked in together.values()} != {0.0}


def test_what_similar_readers_liked_still_counts_for_an_item_somebody_liked(author, settings):
    settings.FEED_NEIGHBOURS_CACHE_SECONDS = 0
    reader = reader_with(seeks_vector=basis(0))
    neighbour = reader_with(seeks_vector=basis(0, 1))
    liked = item(author, embedding=basis(9))
    ((_, ranked),) = scores_for_readers(readers=[reader], item=liked)
    assert ranked.parts["neighbours"] == 0.0  # nobody liked it: the similar readers were not even asked
    ItemFeedback.objects.create(reader=neighbour, item=liked, score=2, event_id="e1")
    ((_, ranked),) = scores_for_readers(readers=[reader], item=liked)
    assert ranked.parts["neighbours"] > 0
