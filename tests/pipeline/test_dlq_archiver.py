"""The dead-letter archiver cannot lose letters: its retries have no delivery limit and pause while PostgreSQL
is down, entries that are not letters (fields missing, bytes not UTF-8, NUL characters) are stored as letters
of their own, no `<stream>:dlq:dlq` is ever written, and any such stream left by an older version is drained."""

from __future__ import annotations

import json
import time

import pytest

from eigenflux.base.redis import get_redis
from pipeline import metrics
from pipeline.consumers.dead_letter_archive import GROUP, DlqArchiver, dlq_archive_drain
from pipeline.models import DeadLetter, ErrorClass
from pipeline.streams import dlq_stream
from tests.pgstat import test_db_connect
from tests.pipeline.runtime.fixtures import pipeline_env, run_pipeline, wait_for  # noqa: F401 - fixtures

DLQ = "{stream:item:publish}:dlq"


def letter(n: int, **fields) -> dict[str, str]:
    """A letter as pipeline.runtime.dead_lettering writes it."""
    return {
        "stream": "stream:item:publish",
        "group": "cg:item:publish",
        "message_id": f"{1000 + n}-0",
        "event_id": f"event-{n}",
        "subject": str(n),
        "event_type": "io.eigenflux.item.published.v1",
        "delivery_count": "3",
        "error_class": "transient",
        "error": f"failure {n}",
        "payload": json.dumps({"id": f"event-{n}", "data": "{}"}),
        "failed_at": "2026-01-01T00:00:00Z",
        "consumer": "c",
        **fields,
    }


@pytest.mark.django_db(transaction=True)
def test_entries_that_are_not_letters_are_archived_as_they_are(redis_client, settings):
    raw = get_redis(settings.REDIS_URL, raw=True)
    undecodable = raw.xadd(DLQ, {b"stream": b"s\xff", b"group": b"g", b"message_id": b"1-0"}).decode()
    incomplete = redis_client.xadd(DLQ, {"stream": "s", "note": "no group, no id"})
    with_nul = redis_client.xadd(DLQ, letter(1, error="bad\x00byte", payload=json.dumps({"data": "a\x00b"})))

    assert DlqArchiver(client=raw).drain() == 3

    odd = DeadLetter.objects.get(message_id=undecodable)
    assert (odd.stream, odd.group, odd.error_class) == (DLQ, GROUP, ErrorClass.PERMANENT)
    assert "not UTF-8" in odd.error and odd.payload["_encoding"] == "base64"
    missing = DeadLetter.objects.get(message_id=incomplete)
    assert "without group, message_id" in missing.error and missing.payload["note"] == "no group, no id"
    kept = DeadLetter.objects.get(message_id="1001-0")
    assert kept.error == "bad\\u0000byte" and kept.payload["data"] == "a\\u0000b"
    assert with_nul and redis_client.xpending(DLQ, GROUP)["pending"] == 0


@pytest.mark.django_db(transaction=True)
def test_dead_letter_streams_named_before_hash_tags_are_drained(redis_client):
    """The upgrade path from `<stream>:dlq` to `{<stream>}:dlq`: letters left under the old name (read or not
    by an old archiver) reach the table through the scheduled drain; none is lost or stored twice."""
    old = "stream:item:publish:dlq"
    redis_client.xgroup_create(old, GROUP, id="0", mkstream=True)
    redis_client.xadd(old, letter(1))
    redis_client.xreadgroup(GROUP, "old-archiver-that-died", {old: ">"})  # read, never archived
    redis_client.xadd(old, letter(2))
    redis_client.xadd(DLQ, letter(3))  # and one under the new name
    assert dlq_archive_drain() == 2
    assert dlq_archive_drain() == 0
    # The one the dead archiver held is taken over once idle long enough (RECLAIM_IDLE_MS), as for any stream.
    assert DlqArchiver(client=get_redis(raw=True), streams=(old,)).reclaim(min_idle_ms=0) == 1
    assert sorted(DeadLetter.objects.values_list("subject", flat=True)) == ["1", "2", "3"]


@pytest.mark.django_db(transaction=True)
def test_letters_an_older_archiver_dead_lettered_are_unwrapped(redis_client):
    original = letter(7)
    redis_client.xadd(
        dlq_stream(DLQ),
        {
            "stream": DLQ,
            "group": GROUP,
            "message_id": "5-0",
            "error_class": "transient",
            "error": "delivered 4 times",
            "payload": json.dumps(original),
        },
    )
    assert dlq_archive_drain() == 1
    stored = DeadLetter.objects.get()
    assert (stored.stream, stored.group, stored.message_id, stored.subject) == (
        "stream:item:publish",
        "cg:item:publish",
        "1007-0",
        "7",
    )


@pytest.mark.django_db(transaction=True)
def test_the_scheduled_drain_reads_the_current_streams_with_the_runtime_consumers(redis_client, settings):
    """Leases as any consumer: a letter a crashed archiver consumer held is taken over once idle past the lease
    (DlqArchiver would wait a minute), malformed entries go through the final hook, and the runtime counts it."""
    settings.PIPELINE_LEASE_SECONDS = 0.5
    acked = metrics.MESSAGES.labels(DLQ, GROUP, "acked")
    before = acked._value.get()
    redis_client.xgroup_create(DLQ, GROUP, id="0", mkstream=True)
    redis_client.xadd(DLQ, letter(1))
    redis_client.xreadgroup(GROUP, "dlq-archive-item-publish-gone-1-0000", {DLQ: ">"})  # crashed holding it
    redis_client.xadd(DLQ, letter(2))
    redis_client.xadd(DLQ, {"stream": "s", "note": "no group, no id"})
    time.sleep(0.6)

    assert dlq_archive_drain() == 3

    assert sorted(DeadLetter.objects.exclude(group=GROUP).values_list("subject", flat=True)) == ["1", "2"]
    malformed = DeadLetter.objects.get(group=GROUP)
    assert malformed.error_class == ErrorClass.PERMANENT and "without group, message_id" in malformed.error
    assert redis_client.xpending(DLQ, GROUP)["pending"] == 0
    assert acked._value.get() == before + 2
    assert dlq_archive_drain() == 0


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_the_scheduled_drain_ends_at_its_deadline_and_what_it_left_is_taken_over_next_time(redis_client, settings):
    """The archive table is locked (a stuck database): the drain still returns at its deadline, the letter stays
    pending instead of being lost or ACKed, and the next drain takes it over from the consumer it left."""
    settings.PIPELINE_GRACE_SECONDS = 0.5
    settings.PIPELINE_LEASE_SECONDS = 0.5
    redis_client.xadd(DLQ, letter(1))
    locker = test_db_connect(autocommit=False)
    try:
        locker.execute(f"LOCK TABLE {DeadLetter._meta.db_table} IN ACCESS EXCLUSIVE MODE")
        assert dlq_archive_drain(timeout=1.0) == 0
        assert redis_client.xpending(DLQ, GROUP)["pending"] == 1
    finally:
        locker.rollback()
        locker.close()
    # The handler that was waiting on the lock stores the letter now; nobody is left to ACK it.
    wait_for(lambda: DeadLetter.objects.count() == 1, 10, message="the waiting handler finished")
    time.sleep(0.6)  # idle past the lease
    assert dlq_archive_drain() == 0  # already stored: taken over and ACKed, not stored twice
    assert redis_client.xpending(DLQ, GROUP)["pending"] == 0
    assert DeadLetter.objects.count() == 1


@pytest.mark.slow
def test_the_archiver_loses_no_letter_while_postgresql_is_down_30s(run_pipeline, postgres_proxy, redis_client):  # noqa: F811
    """Letters arrive before and during a 30 s PostgreSQL outage (for the archiver's process only): every one is
    archived once the database is back, none is dead-lettered again, nothing stays pending."""
    for n in range(10):
        redis_client.xadd(DLQ, letter(n))
    proc = run_pipeline(
        "--consumer",
        "dlq-archive-item-publish",
        "--no-relay",
        "--no-housekeeping",
        env={
            "DATABASE_URL": postgres_proxy.database_url,
            "PIPELINE_LEASE_SECONDS": "3",
            "PIPELINE_BLOCK_MS": "200",
            "PIPELINE_DB_POOL_TIMEOUT": "2",  # the outage reaches the breaker instead of only blocking handlers
        },
    )
    wait_for(lambda: DeadLetter.objects.count() == 10, 30, message="first letters archived")

    postgres_proxy.down()
    for n in range(10, 30):
        redis_client.xadd(DLQ, letter(n))
        time.sleep(0.5)
    time.sleep(20)  # 30 s in all
    assert DeadLetter.objects.count() == 10
    postgres_proxy.up()

    wait_for(lambda: DeadLetter.objects.count() == 30, 60, message="letters written during the outage archived")
    wait_for(lambda: redis_client.xpending(DLQ, GROUP)["pending"] == 0, 20, message="all ACKed")
    assert not redis_client.exists(dlq_stream(DLQ))  # the archiver never dead-letters its own failures
    assert sorted(DeadLetter.objects.values_list("subject", flat=True)) == sorted(str(n) for n in range(30))
    output = proc.output()
    assert "postgresql is down" in output
    proc.terminate()
    assert proc.wait(30) == 0, output[-3000:]
