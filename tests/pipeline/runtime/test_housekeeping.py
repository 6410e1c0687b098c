"""MINID trimming, the stuck-item sweeper and the lag poller, against real Redis and PostgreSQL."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest
from django.utils import timezone

from items.events import ITEM_PUBLISHED, STREAM_ITEM_PUBLISH
from items.models import ItemStatus, OutboxEvent, ProcessedItem
from pipeline import metrics
from pipeline.housekeeping import poll_lag, sweep_stuck_items, trim_stream
from tests.factories import make_item
from tests.pipeline.runtime.conftest import envelope

STREAM = "test:trim"


def unfinished(client, stream, groups) -> set[str]:
    """Ids some group has not finished: pending anywhere, or after its last-delivered id."""
    ids = [mid for mid, _ in client.xrange(stream)]
    result = set()
    for group in groups:
        info = next(g for g in client.xinfo_groups(stream) if g["name"] == group)
        last = tuple(map(int, info["last-delivered-id"].split("-")))
        result |= {mid for mid in ids if tuple(map(int, mid.split("-"))) > last}
        result |= {p["message_id"] for p in client.xpending_range(stream, group, "-", "+", 10_000)}
    return result


def test_minid_trim_keeps_everything_a_group_has_not_finished(redis_client):
    groups = ["cg:a", "cg:b", "cg:c"]
    for group in groups:
        redis_client.xgroup_create(STREAM, group, id="0", mkstream=True)
    rng = random.Random(7)
    for _round in range(20):
        for _ in range(rng.randint(0, 20)):
            redis_client.xadd(STREAM, envelope())
        for group in groups:
            got = redis_client.xreadgroup(group, "c", {STREAM: ">"}, count=rng.randint(1, 10))
            ids = [mid for mid, _ in got[0][1]] if got else []
            acked = [mid for mid in ids if rng.random() < 0.7]
            if acked:
                redis_client.xack(STREAM, group, *acked)
        before = unfinished(redis_client, STREAM, groups)
        trim_stream(redis_client, STREAM, expected_groups=frozenset(groups))
        left = {mid for mid, _ in redis_client.xrange(STREAM)}
        assert before <= left
    # ...and it does trim: finish everything, then only nothing-needed entries go.
    for group in groups:
        while got := redis_client.xreadgroup(group, "c", {STREAM: ">"}, count=100):
            redis_client.xack(STREAM, group, *[mid for mid, _ in got[0][1]])
        for p in redis_client.xpending_range(STREAM, group, "-", "+", 10_000):
            redis_client.xack(STREAM, group, p["message_id"])
    trim_stream(redis_client, STREAM, expected_groups=frozenset(groups))
    assert redis_client.xlen(STREAM) == 0


def test_trim_waits_for_every_expected_group(redis_client):
    redis_client.xgroup_create(STREAM, "cg:a", id="0", mkstream=True)
    redis_client.xadd(STREAM, envelope())
    got = redis_client.xreadgroup("cg:a", "c", {STREAM: ">"})
    redis_client.xack(STREAM, "cg:a", got[0][1][0][0])
    redis_client.xadd(STREAM, envelope())
    assert trim_stream(redis_client, STREAM, expected_groups=frozenset({"cg:a", "cg:missing"})) is None
    assert redis_client.xlen(STREAM) == 2
    assert trim_stream(redis_client, STREAM, expected_groups=frozenset({"cg:a"})) is not None
    assert redis_client.xlen(STREAM) == 1


@pytest.mark.django_db(transaction=True)
def test_sweeper_republishes_stuck_items_once_with_replay():
    stuck = make_item()
    fresh = make_item()
    leased = make_item()
    old = timezone.now() - timedelta(hours=1)
    # The original events went out long ago (dispatched), and the items never moved.
    OutboxEvent.objects.update(dispatched_at=old, created_at=old)
    ProcessedItem.objects.filter(pk__in=[stuck.pk, leased.pk]).update(updated_at=old)
    ProcessedItem.objects.filter(pk=leased.pk).update(
        status=ItemStatus.PROCESSING, lease_expires_at=timezone.now() + timedelta(minutes=5)
    )

    assert sweep_stuck_items(older_than_seconds=600) == 1

    replays = OutboxEvent.objects.filter(dispatched_at__isnull=True)
    assert [(e.subject, e.event_type, e.envelope["replay"]) for e in replays] == [(str(stuck.pk), ITEM_PUBLISHED, "1")]
    assert replays[0].envelope["data"] == f'{{"author_id":"{stuck.author_id}","item_id":"{stuck.pk}"}}'
    assert str(fresh.pk) not in {e.subject for e in replays}
    # The replay is still undispatched: a second sweep does not add another.
    assert sweep_stuck_items(older_than_seconds=600) == 0


@pytest.mark.django_db(transaction=True)
def test_lag_poller_reports_pending_lag_length_and_outbox(redis_client):
    make_item()
    redis_client.xgroup_create(STREAM, "cg:a", id="0", mkstream=True)
    for _ in range(5):
        redis_client.xadd(STREAM, envelope())
    redis_client.xreadgroup("cg:a", "c", {STREAM: ">"}, count=2)

    figures = poll_lag(redis_client, {STREAM, STREAM_ITEM_PUBLISH})

    assert figures[STREAM] == {"length": 5, "groups": {"cg:a": {"pending": 2, "lag": 3, "consumers": 1}}}
    assert figures["outbox"]["backlog"] == 1
    assert metrics.LAG.labels(STREAM, "cg:a")._value.get() == 3
    assert metrics.PENDING.labels(STREAM, "cg:a")._value.get() == 2
    assert metrics.OUTBOX_BACKLOG._value.get() == 1
