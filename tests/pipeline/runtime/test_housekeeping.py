"""MINID trimming, the stuck-item sweeper, consumer pruning and the lag poller, against real Redis and PostgreSQL."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest
from django.utils import timezone

from items.events import ITEM_PUBLISHED, STREAM_ITEM_PUBLISH
from items.models import ItemStatus, OutboxEvent, ProcessedItem
from pipeline import metrics
from pipeline.housekeeping import poll_lag, prune_consumers, sweep_stuck_items, sweeper_deadline, trim_stream
from pipeline.runtime import liveness
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
        trim_stream(redis_client, STREAM, min_age_seconds=0)
        left = {mid for mid, _ in redis_client.xrange(STREAM)}
        assert before <= left
    # ...and it does trim: finish everything, then only nothing-needed entries go.
    for group in groups:
        while got := redis_client.xreadgroup(group, "c", {STREAM: ">"}, count=100):
            redis_client.xack(STREAM, group, *[mid for mid, _ in got[0][1]])
        for p in redis_client.xpending_range(STREAM, group, "-", "+", 10_000):
            redis_client.xack(STREAM, group, p["message_id"])
    trim_stream(redis_client, STREAM, min_age_seconds=0)
    assert redis_client.xlen(STREAM) == 0


def test_trim_does_not_wait_for_groups_that_do_not_exist_but_keeps_the_retention_window(redis_client):
    redis_client.xgroup_create(STREAM, "cg:a", id="0", mkstream=True)
    old = [redis_client.xadd(STREAM, envelope(), id=f"{1000 + i}-0") for i in range(3)]  # from 1970
    got = redis_client.xreadgroup("cg:a", "c", {STREAM: ">"})
    redis_client.xack(STREAM, "cg:a", *[mid for mid, _ in got[0][1]])
    recent = redis_client.xadd(STREAM, envelope())  # now, and finished by cg:a too
    redis_client.xack(STREAM, "cg:a", *[mid for mid, _ in redis_client.xreadgroup("cg:a", "c", {STREAM: ">"})[0][1]])

    # Only cg:a exists (another group of this stream was never deployed): it does not hold trimming back...
    assert trim_stream(redis_client, STREAM, min_age_seconds=600) is not None
    # ...but nothing younger than the minimum retention age goes, so a group created later still finds it.
    assert [mid for mid, _ in redis_client.xrange(STREAM)] == [recent]
    assert old[0] not in {mid for mid, _ in redis_client.xrange(STREAM)}


def test_trim_of_a_stream_without_groups_is_by_age_only(redis_client):
    redis_client.xadd(STREAM, envelope(), id="1000-0")
    young = redis_client.xadd(STREAM, envelope())
    trim_stream(redis_client, STREAM, min_age_seconds=600)
    assert [mid for mid, _ in redis_client.xrange(STREAM)] == [young]


def test_a_dead_letter_stream_is_trimmed_only_below_what_the_archiver_finished(redis_client):
    dlq = "test:trim:dlq"
    for i in range(3):
        redis_client.xadd(dlq, {"stream": "s", "group": "g", "message_id": f"{i}-0"}, id=f"{1000 + i}-0")
    assert trim_stream(redis_client, dlq, min_age_seconds=0, required_group="cg:dlq:archive") is None
    assert redis_client.xlen(dlq) == 3  # no archive group yet: nothing is trimmed
    redis_client.xgroup_create(dlq, "cg:dlq:archive", id="0")
    first = redis_client.xreadgroup("cg:dlq:archive", "archiver", {dlq: ">"}, count=1)[0][1][0][0]
    redis_client.xack(dlq, "cg:dlq:archive", first)
    trim_stream(redis_client, dlq, min_age_seconds=0, required_group="cg:dlq:archive")
    assert [mid for mid, _ in redis_client.xrange(dlq)] == ["1001-0", "1002-0"]  # only the archived one went


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


def test_the_sweeper_deadline_is_derived_from_the_leases_and_the_retries(settings):
    # item claim lease 120 s + retry span (2 s + 4 s between three deliveries) + two entry leases of 30 s
    assert sweeper_deadline() == 120 + 6 + 60
    settings.ENRICHMENT_LEASE_SECONDS = 60
    settings.PIPELINE_LEASE_SECONDS = 10
    assert sweeper_deadline() == 60 + 6 + 20
    settings.PIPELINE_SWEEPER_DEADLINE_SECONDS = 300
    assert sweeper_deadline() == 300


def _stale(item) -> None:
    old = timezone.now() - timedelta(hours=1)
    OutboxEvent.objects.filter(subject=str(item.pk)).update(dispatched_at=old, created_at=old)
    ProcessedItem.objects.filter(pk=item.pk).update(updated_at=old)


@pytest.mark.django_db(transaction=True)
def test_the_sweeper_skips_items_whose_entry_will_still_be_handled(redis_client):
    """Only an item whose stream entry is gone is re-published; one waiting in a backlog or pending under a
    consumer is not (it would be handled twice)."""
    redis_client.xgroup_create(STREAM_ITEM_PUBLISH, "cg:item:publish", id="0", mkstream=True)
    waiting, pending, finished, lost = make_item(), make_item(), make_item(), make_item()
    ids = {}
    for item in (pending, finished, waiting, lost):
        ids[item.pk] = redis_client.xadd(STREAM_ITEM_PUBLISH, envelope(subject=str(item.pk)))
        OutboxEvent.objects.filter(subject=str(item.pk)).update(stream_message_id=ids[item.pk])
        _stale(item)
    redis_client.xreadgroup("cg:item:publish", "c", {STREAM_ITEM_PUBLISH: ">"}, count=2)  # pending, finished
    redis_client.xack(STREAM_ITEM_PUBLISH, "cg:item:publish", ids[finished.pk])
    redis_client.xdel(STREAM_ITEM_PUBLISH, ids[lost.pk])  # Redis lost it (trimmed, flushed...)

    assert sweep_stuck_items(older_than_seconds=600, client=redis_client) == 2

    replays = OutboxEvent.objects.filter(dispatched_at__isnull=True)
    assert {e.subject for e in replays} == {str(finished.pk), str(lost.pk)}


def test_departed_consumers_are_removed_from_their_groups(redis_client):
    redis_client.xgroup_create(STREAM, "cg:a", id="0", mkstream=True)
    for _ in range(3):
        redis_client.xadd(STREAM, envelope())
    redis_client.xreadgroup("cg:a", "holding", {STREAM: ">"}, count=1)  # gone, but still holds an entry
    for name in ("departed", "alive"):
        [(_, [(message_id, _)])] = redis_client.xreadgroup("cg:a", name, {STREAM: ">"}, count=1)
        redis_client.xack(STREAM, "cg:a", message_id)
    liveness.publish(redis_client, [{"consumer": "alive"}])

    assert prune_consumers(redis_client, [STREAM], idle_seconds=0) == 1

    names = {c["name"] for c in redis_client.xinfo_consumers(STREAM, "cg:a")}
    assert names == {"holding", "alive"}  # its pending entry is not dropped; a live one is kept
