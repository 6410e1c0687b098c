"""The impression log: every feed page served (native for_me and unseen, the client's feed poll) is one outbox
event on stream:replay:log, which cg:replay:log stores as one row per item with position, score, feed and
ranking version; feedback and feed events join the impression they answer; feed_report prints the figures;
retention removes old rows."""

from __future__ import annotations

import io
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.utils import timezone

from items.events import FEED_PAGE_SERVED, STREAM_REPLAY_LOG
from items.feed_log import feed_report, impression_for
from items.feed_ranking import rank_feed
from items.models import FeedEvent, FeedImpression, ItemFeedback, OutboxEvent
from items.services.impressions import impressions_record
from pipeline.consumers.replay_log import ReplayLogConsumer
from pipeline.retention import feed_impressions_prune, retention_run
from pipeline.runtime import DeadLetterNow
from tests.factories import make_agent, make_completed_item, outbox_stream_event

pytestmark = pytest.mark.django_db
PREFIX = "/eigenflux/api/v1"


def page_events() -> list[OutboxEvent]:
    return list(OutboxEvent.objects.filter(stream=STREAM_REPLAY_LOG).order_by("pk"))


def store_pages() -> list[FeedImpression]:
    """Hand every page event to the cg:replay:log consumer, as the relay and the stream would."""
    for row in page_events():
        ReplayLogConsumer().handle(outbox_stream_event(row, group=ReplayLogConsumer.group))
    return list(FeedImpression.objects.order_by("served_at", "position"))


def client_for(token: str) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Bearer {token}")


@pytest.fixture
def network():
    author, _ = make_agent()
    items = [make_completed_item(author, f"Offering GPU hours, batch {n}.") for n in range(5)]
    reader, token = make_agent()
    return reader, token, items


def test_a_for_me_page_is_one_event_stored_as_a_row_per_item(network, settings):
    settings.FEED_RANKING_VERSION = "test-v7"
    reader, token, _ = network
    body = client_for(token).get("/api/v1/feed?for_me=1&limit=3").json()
    served = [int(item["item_id"]) for item in body["items"]]
    assert len(served) == 3
    (event,) = page_events()
    assert event.event_type == FEED_PAGE_SERVED
    rows = store_pages()
    assert [(r.item_id, r.position) for r in rows] == [(pk, n) for n, pk in enumerate(served, start=1)]
    assert {(r.reader_id, r.feed, r.ranking_version) for r in rows} == {(reader.pk, "for_me", "test-v7")}
    # Each row carries the ranking's score of its item, best first (the exploration slot may break the order).
    ranked = {entry.item.pk: entry.score for entry in rank_feed(reader=reader, page_size=3, depth=4)}
    assert [r.score for r in rows] == [pytest.approx(ranked[r.item_id]) for r in rows]
    assert len({r.page_id for r in rows}) == 1


def test_unseen_pages_continue_their_positions_across_the_delivery(network, settings):
    settings.FEED_RANKING_VERSION = "test-v7"
    _, token, _ = network
    client = client_for(token)
    first = client.get("/api/v1/feed?unseen=1&for_me=1&limit=2").json()
    second = client.get(f"/api/v1/feed?unseen=1&for_me=1&limit=2&cursor={first['next_cursor']}").json()
    served = [int(i["item_id"]) for i in first["items"] + second["items"]]
    rows = store_pages()
    assert [(r.item_id, r.position, r.feed) for r in rows] == [(pk, n, "unseen") for n, pk in enumerate(served, 1)]
    assert len({r.delivery_id for r in rows}) == 1 and rows[0].delivery_id.startswith("imp_")
    assert len({r.page_id for r in rows}) == 2
    assert {r.ranking_version for r in rows} == {"test-v7"}


def test_an_unseen_page_in_plain_newest_first_order_is_logged_as_recency(network):
    _, token, _ = network
    assert client_for(token).get("/api/v1/feed?unseen=1&limit=2").json()["items"]
    assert {r.ranking_version for r in store_pages()} == {"recency"}


def test_the_client_feed_poll_logs_refresh_and_load_more(network):
    from tests.items.compat.conftest import CompatClient

    _, token, _ = network
    client = CompatClient(token)
    refresh = client.get("/items/feed?action=refresh&limit=2")[1]["data"]
    more = client.get("/items/feed?action=load_more&limit=2")[1]["data"]
    served = [int(i["item_id"]) for i in refresh["items"] + more["items"]]
    rows = store_pages()
    assert [(r.item_id, r.position, r.feed) for r in rows] == [(pk, n, "client") for n, pk in enumerate(served, 1)]
    assert {r.delivery_id for r in rows} == {refresh["impression_id"]}


def test_an_empty_page_logs_nothing(network):
    _, token, _ = network
    assert client_for(token).get("/api/v1/feed?for_me=1&domain=nowhere").json()["items"] == []
    assert page_events() == []


def test_scores_are_logged_and_bad_pages_refused(network):
    reader, _, items = network
    assert impressions_record(reader=reader, items=items[:2], scores=[0.91234567, None], feed="for_me")
    rows = store_pages()
    assert [r.score for r in rows] == [0.912346, None]
    with pytest.raises(ValueError, match="2 scores for 3 items"):
        impressions_record(reader=reader, items=items[:3], scores=[1.0, 2.0], feed="for_me")
    with pytest.raises(ValueError, match="feed must be one of"):
        impressions_record(reader=reader, items=items[:1], feed="trending")
    assert impressions_record(reader=reader, items=[], feed="for_me") is False


def test_a_redelivered_page_is_stored_once_and_a_broken_one_is_dead_lettered(network):
    reader, _, items = network
    impressions_record(reader=reader, items=items[:3], feed="for_me")
    (row,) = page_events()
    for attempt in (1, 2):
        ReplayLogConsumer().handle(outbox_stream_event(row, group=ReplayLogConsumer.group, delivery_count=attempt))
    assert FeedImpression.objects.count() == 3
    broken = outbox_stream_event(row, group=ReplayLogConsumer.group)
    broken.data["scores"] = [None]
    with pytest.raises(DeadLetterNow, match="bad feed, time, scores"):
        ReplayLogConsumer().handle(broken)


def impression(reader_id, item_id, position, served_at, *, version="v1", feed="for_me") -> FeedImpression:
    return FeedImpression.objects.create(
        page_id=uuid.uuid4(),
        reader_id=reader_id,
        item_id=item_id,
        position=position,
        feed=feed,
        ranking_version=version,
        served_at=served_at,
    )


def feedback_at(reader, item, score: int, at: datetime) -> ItemFeedback:
    row = ItemFeedback.objects.create(reader=reader, item=item, score=score, event_id=str(uuid.uuid4()))
    ItemFeedback.objects.filter(pk=row.pk).update(created_at=at)
    return row


def test_feedback_joins_the_latest_impression_served_before_it(network):
    reader, _, items = network
    now = timezone.now()
    older = impression(reader.pk, items[0].pk, 4, now - timedelta(hours=3))
    newer = impression(reader.pk, items[0].pk, 1, now - timedelta(hours=1))
    assert impression_for(reader_id=reader.pk, item_id=items[0].pk, at=now - timedelta(hours=2)) == older
    assert impression_for(reader_id=reader.pk, item_id=items[0].pk, at=now) == newer
    assert impression_for(reader_id=reader.pk, item_id=items[1].pk, at=now) is None
    feedback_at(reader, items[0], 2, now - timedelta(minutes=30))
    # Two days: the report starts at midnight UTC, and between 00:00 and 03:00 the impressions fall on yesterday.
    rows = {row.position: row for row in feed_report(days=2)}
    # The score answers the later page (position 1), not the earlier one (position 4).
    assert (rows[1].scored, rows[1].positive, rows[4].scored) == (1, 1, 0)


REPORT_DAY = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
EXPECTED_REPORT = """\
day         version  position  impressions  scored  feedback rate  +1/+2  -1  acted
2026-11-30  v1              1            2       2         100.0%      1   1      1
2026-11-30  v1              2            2       0           0.0%      0   0      0
2026-11-30  v2              1            1       1         100.0%      1   0      0
2026-11-30  v2             >2            1       0           0.0%      0   0      1
"""


def test_feed_report_prints_the_rate_by_day_version_and_position(network, monkeypatch):
    reader, _, items = network
    other, _ = make_agent()
    monkeypatch.setattr(timezone, "now", lambda: REPORT_DAY + timedelta(hours=5))
    impression(reader.pk, items[0].pk, 1, REPORT_DAY)
    impression(reader.pk, items[1].pk, 2, REPORT_DAY)
    impression(other.pk, items[2].pk, 1, REPORT_DAY)
    impression(other.pk, items[3].pk, 2, REPORT_DAY)
    impression(reader.pk, items[2].pk, 1, REPORT_DAY, version="v2")
    impression(reader.pk, items[3].pk, 7, REPORT_DAY, version="v2")
    impression(reader.pk, items[4].pk, 1, REPORT_DAY - timedelta(days=3))  # outside --days 2
    later = REPORT_DAY + timedelta(minutes=5)
    feedback_at(reader, items[0], 2, later)
    feedback_at(other, items[2], -1, later)
    feedback_at(reader, items[2], 1, later)
    feedback_at(reader, items[1], 1, REPORT_DAY - timedelta(hours=1))  # before it was served: joins nothing
    for agent, item in ((other, items[2]), (reader, items[3])):
        FeedEvent.objects.create(agent=agent, item_id=item.pk, kind="surface", dedup_key=f"k{item.pk}")
    out = io.StringIO()
    call_command("feed_report", "--days", "2", "--positions", "2", stdout=out)
    assert out.getvalue() == EXPECTED_REPORT
    out = io.StringIO()
    call_command("feed_report", "--days", "2", "--positions", "2", "--version", "v2", stdout=out)
    assert [line.split()[1] for line in out.getvalue().splitlines()[1:]] == ["v2", "v2"]


def test_feed_report_refuses_bad_input_and_says_when_there_is_nothing(db):
    with pytest.raises(CommandError, match="at least 1"):
        call_command("feed_report", "--days", "0")
    with pytest.raises(CommandError):
        call_command("feed_report", "--feed", "trending")
    out = io.StringIO()
    call_command("feed_report", stdout=out)
    assert out.getvalue() == "no impressions in the last 7 day(s)\n"


def test_retention_deletes_impressions_older_than_the_setting(network, settings):
    settings.FEED_IMPRESSION_RETENTION_DAYS = 10
    reader, _, items = network
    now = timezone.now()
    old = impression(reader.pk, items[0].pk, 1, now - timedelta(days=11))
    kept = impression(reader.pk, items[1].pk, 1, now - timedelta(days=9))
    assert feed_impressions_prune(now) == 1
    assert list(FeedImpression.objects.values_list("pk", flat=True)) == [kept.pk]
    assert not FeedImpression.objects.filter(pk=old.pk).exists()
    impression(reader.pk, items[2].pk, 1, now - timedelta(days=30))
    assert retention_run(now)["feed_impressions"] == 1


def test_a_clients_score_and_event_join_the_impression_they_answer(network):
    """Through the client's own calls: a poll, a score and a feed event; the stats consumer counts the score."""
    from pipeline.consumers.item_stats import ItemStatsConsumer
    from tests.items.compat.conftest import CompatClient

    reader, token, _ = network
    client = CompatClient(token)
    served = client.get("/items/feed?action=refresh&limit=3")[1]["data"]
    third = served["items"][2]["item_id"]
    assert client.post("/items/feedback", {"items": [{"item_id": third, "score": 2}]})[1]["code"] == 0
    event = {"item_id": third, "kind": "surface", "dedup_key": "e1", "impression_id": served["impression_id"]}
    assert client.post("/items/events", {"events": [event]})[1]["code"] == 0
    store_pages()
    for row in OutboxEvent.objects.filter(event_type="io.eigenflux.item.feedback.v1"):
        ItemStatsConsumer().handle(outbox_stream_event(row, group=ItemStatsConsumer.group))
    score = ItemFeedback.objects.get(reader=reader, item_id=int(third))
    joined = impression_for(reader_id=reader.pk, item_id=int(third), at=score.created_at)
    assert (joined.position, joined.feed, joined.delivery_id) == (3, "client", served["impression_id"])
    rows = {row.position: row for row in feed_report(days=1)}
    assert (rows[3].scored, rows[3].positive, rows[3].acted) == (1, 1, 1)
    assert (rows[1].scored, rows[1].acted) == (0, 0)
