"""The outbox relay against the real test database and Redis: once-only XADD, several relays, NOTIFY wake-up."""

from __future__ import annotations

import statistics
import threading
import time

import pytest
from django.db import connection, transaction

from items.events import build_envelope
from items.models import OutboxEvent
from items.outbox import outbox_event_create
from pipeline.relay import OutboxRelay
from pipeline.streams import stream_maxlen
from tests.pipeline.runtime.consumers import TEST_STREAM, TEST_TYPE
from tests.pipeline.runtime.fixtures import wait_for

RELAY_STREAM = "test:stream:relay"

pytestmark = pytest.mark.django_db(transaction=True)


def add_events(n: int, stream: str = RELAY_STREAM) -> list[str]:
    events = []
    for i in range(n):
        env = build_envelope(event_type=TEST_TYPE, subject=f"s{i % 7}", data={"seq": i})
        events.append(
            OutboxEvent(stream=stream, event_id=env["id"], event_type=TEST_TYPE, subject=env["subject"], envelope=env)
        )
    OutboxEvent.objects.bulk_create(events, batch_size=500)
    return [e.event_id for e in events]


def stream_event_ids(client, stream=RELAY_STREAM) -> list[str]:
    return [fields["id"] for _, fields in client.xrange(stream)]


def test_maxlen_rules():
    assert stream_maxlen("stream:item:events") == 20_000
    assert stream_maxlen("stream:item:stats") == 20_000
    assert stream_maxlen("{stream:item:publish}:dlq") == 10_000
    assert stream_maxlen("stream:item:publish") == 0
    assert stream_maxlen("stream:profile:update") == 0


def test_relay_adds_in_order_and_marks_dispatched(redis_client):
    event_ids = add_events(5)
    assert OutboxRelay().drain() == 5
    entries = redis_client.xrange(RELAY_STREAM)
    assert [f["id"] for _, f in entries] == [str(e) for e in event_ids]
    assert entries[0][1]["data"] == '{"seq":0}' and entries[0][1]["specversion"] == "1.0"
    rows = {str(r.event_id): r for r in OutboxEvent.objects.all()}
    for message_id, fields in entries:
        row = rows[fields["id"]]
        assert row.dispatched_at is not None and row.stream_message_id == message_id and row.attempts == 1
    assert OutboxRelay().drain() == 0


def test_lost_sql_update_after_xadd_causes_no_duplicate(redis_client):
    """The relay 'dies' between XADD and the UPDATE (its transaction rolls back): the rows come back
    undispatched, and the next relay finds the once-marks and records the first stream ids."""
    add_events(10)

    class Crash(Exception):
        pass

    def crash(rows):
        raise Crash

    with pytest.raises(Crash):
        OutboxRelay().relay_batch(after_xadd=crash)
    first_ids = [mid for mid, _ in redis_client.xrange(RELAY_STREAM)]
    assert len(first_ids) == 10
    assert OutboxEvent.objects.filter(dispatched_at__isnull=True).count() == 10

    assert OutboxRelay().drain() == 10

    assert [mid for mid, _ in redis_client.xrange(RELAY_STREAM)] == first_ids
    assert sorted(OutboxEvent.objects.values_list("stream_message_id", flat=True)) == sorted(first_ids)
    # Once committed, the marks are removed (only a crash leaves them, until their TTL).
    assert not list(redis_client.scan_iter("eigenflux:outbox:sent:*"))


def test_relay_sigkilled_between_xadd_and_update_causes_no_duplicate(run_pipeline, pipeline_env, redis_client):
    """A real relay process is held between its XADD and its UPDATE (this test holds a SHARE lock on the
    outbox table, which lets SELECT … FOR UPDATE through but blocks the UPDATE), then SIGKILLed there."""
    add_events(20)
    table = OutboxEvent._meta.db_table
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"LOCK TABLE {table} IN SHARE MODE")
        victim = run_pipeline("--relay-only", env=pipeline_env)
        wait_for(lambda: redis_client.xlen(RELAY_STREAM) == 20, 30, message="victim's XADDs")
        time.sleep(0.3)  # it is now waiting for its UPDATE
        victim.kill()
    first_ids = [mid for mid, _ in redis_client.xrange(RELAY_STREAM)]
    assert OutboxEvent.objects.filter(dispatched_at__isnull=True).count() == 20

    def rows_free() -> bool:  # the dead backend's transaction has been rolled back
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(f"SELECT count(*) FROM (SELECT id FROM {table} FOR UPDATE SKIP LOCKED) t")  # noqa: S608
            return cursor.fetchone()[0] == 20

    wait_for(rows_free, 20, message="the killed relay's locks released")
    rescuer = run_pipeline("--relay-only", "--burst", env=pipeline_env)
    assert rescuer.wait(30) == 0, rescuer.output()

    assert [mid for mid, _ in redis_client.xrange(RELAY_STREAM)] == first_ids
    assert sorted(OutboxEvent.objects.values_list("stream_message_id", flat=True)) == sorted(first_ids)


def test_two_relays_1000_events_each_exactly_once(run_pipeline, pipeline_env, redis_client):
    """Two real run_pipeline --relay-only processes race over 1000 rows (SKIP LOCKED + once-marks)."""
    event_ids = add_events(1000)
    env = {**pipeline_env, "PIPELINE_RELAY_BATCH": "50"}
    relays = [run_pipeline("--relay-only", "--burst", env=env) for _ in range(2)]
    for relay in relays:
        assert relay.wait(60) == 0, relay.output()
    in_stream = stream_event_ids(redis_client)
    assert len(in_stream) == 1000
    assert set(in_stream) == {str(e) for e in event_ids}
    assert OutboxEvent.objects.filter(dispatched_at__isnull=True).count() == 0
    assert OutboxEvent.objects.filter(stream_message_id="").count() == 0


def test_relay_error_is_recorded_and_retried(redis_client):
    redis_client.set(RELAY_STREAM, "not a stream")  # XADD fails with WRONGTYPE
    add_events(2)
    OutboxRelay().drain()
    rows = list(OutboxEvent.objects.all())
    assert all(r.dispatched_at is None and r.attempts == 1 and "WRONGTYPE" in r.last_error for r in rows)
    redis_client.delete(RELAY_STREAM)
    assert OutboxRelay().drain() == 0, "still backing off"
    time.sleep(1.1)  # the first back-off is one second
    OutboxRelay().drain()
    assert OutboxEvent.objects.filter(dispatched_at__isnull=True).count() == 0
    assert redis_client.xlen(RELAY_STREAM) == 2


def test_notify_wakes_the_relay(redis_client):
    """With a 5 s poll only LISTEN/NOTIFY (sent by outbox_event_create after commit) can make this quick."""
    relay = OutboxRelay()
    stop = threading.Event()
    thread = threading.Thread(target=relay.run, args=(stop,), kwargs={"poll_seconds": 5.0}, daemon=True)
    thread.start()
    try:
        wait_for(lambda: relay.empty_rounds >= 1, 10, message="relay start")
        time.sleep(0.2)  # the relay is now waiting on its LISTEN connection
        latencies = []
        for i in range(20):
            with transaction.atomic():
                outbox_event_create(stream=TEST_STREAM, event_type=TEST_TYPE, subject="n", data={"seq": i})
            committed = time.perf_counter()
            wait_for(lambda n=i + 1: redis_client.xlen(TEST_STREAM) >= n, 3, interval=0.0005, message="relay")
            latencies.append(time.perf_counter() - committed)
    finally:
        stop.set()
        thread.join(10)
    p50 = statistics.median(latencies)
    print(f"NOTIFY wake-up, commit -> entry in stream: p50 {p50 * 1000:.2f} ms, max {max(latencies) * 1000:.2f} ms")
    assert max(latencies) < 2.0  # far below the 5 s poll: every wake-up came from NOTIFY


def test_a_failed_xadd_backs_off_and_is_retried_never_given_up(redis_client):
    redis_client.set(RELAY_STREAM, "not a stream")  # every XADD to it now fails with WRONGTYPE
    (event_id,) = add_events(1)
    relay = OutboxRelay()
    for _ in range(20):  # hammering the relay must not burn through the row's chances
        relay.drain()
    row = OutboxEvent.objects.get(event_id=event_id)
    assert row.dispatched_at is None
    assert row.attempts == 1, "a row in back-off is not selected again"
    assert "WRONGTYPE" in row.last_error
    assert row.next_attempt_at is not None
    redis_client.delete(RELAY_STREAM)  # Redis recovers
    OutboxEvent.objects.filter(pk=row.pk).update(attempts=50, next_attempt_at=None)  # however often it failed
    assert relay.drain() == 1
    assert stream_event_ids(redis_client) == [str(event_id)]
    assert OutboxEvent.objects.get(pk=row.pk).dispatched_at is not None
