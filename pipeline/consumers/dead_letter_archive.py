"""cg:dlq:archive: copies every `{<stream>}:dlq` entry into the DeadLetter table (idempotent by origin).

Dead-letter entries are not CloudEvents envelopes (pipeline.runtime.dead_lettering writes flat letter fields:
stream, group, message_id, error_class, error, payload, failed_at, ...). Two ways read them, both in the
group cg:dlq:archive:
- the registered consumers at the end of this module (one per dead-letter stream), which `run_pipeline`
  runs like any other: they override `parse` to read letter fields instead of an envelope. The scheduled
  auto-requeue job (pipeline.scheduled_jobs) runs the same consumers on the runtime in burst mode
  (`dlq_archive_drain`) before it looks for letters;
- DlqArchiver, a plain loop kept for the dead-letter stream names of older versions, which no consumer
  reads: the drain empties them when they exist.
Rows are written by pipeline.dead_letter_table, which imports nothing of this module.
Archiving is idempotent by origin (stream, group, message id), so either may see an entry twice.

The archiver cannot lose a letter: its retries have no delivery limit (the backoff grows to a minute, and
while PostgreSQL is down its circuit breaker pauses it without spending deliveries), and an entry that is
not a letter is stored as a letter of its own (`on_dead_letter`) instead of being dead-lettered again — no
`<stream>:dlq:dlq` is ever written. Such streams from older versions are still drained by DlqArchiver, and
so are the dead-letter streams of versions before hash tags (`<stream>:dlq`, in another Redis Cluster slot
than their stream): after an upgrade their letters reach the table through the scheduled drain.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from typing import Any

import redis

from eigenflux.base.redis import get_redis
from items.events import (
    STREAM_ITEM_EVENTS,
    STREAM_ITEM_PUBLISH,
    STREAM_ITEM_STATS,
    STREAM_PROFILE_UPDATE,
    STREAM_REPLAY_LOG,
)
from pipeline.dead_letter_table import Archived, dead_letter_archive_fields, dead_letter_archive_malformed
from pipeline.runtime import Consumer, Event, GiveUp, RetryPolicy, register
from pipeline.runtime.dead_lettering import ARCHIVE_GROUP, letter_payload
from pipeline.runtime.entries import UndecodableEntry, decode_fields
from pipeline.runtime.event import MalformedEntry
from pipeline.runtime.supervisor import Supervisor
from pipeline.streams import DLQ_STREAMS, LEGACY_DLQ_STREAMS, dlq_stream, text

log = logging.getLogger(__name__)

GROUP = ARCHIVE_GROUP
# Entries pending this long under another archiver (which crashed) are taken over.
RECLAIM_IDLE_MS = 60_000
BATCH = 100
# The scheduled drain stops its runtime consumers after this long even if letters keep coming or PostgreSQL is
# down (the job's own timeout is 300 s; what is left stays pending).
DRAIN_TIMEOUT_SECONDS = 120.0
ARCHIVE_RETRIES = RetryPolicy(max_retries=None, base=1.0, factor=2.0, max_delay=60.0)
_LETTER_FIELDS = ("stream", "group", "message_id")


class DlqArchiver:
    def __init__(self, *, client: redis.Redis | None = None, streams: tuple[str, ...] = DLQ_STREAMS):
        self.client = client or get_redis(raw=True)
        self.streams = streams
        self.name = f"dlq-archive-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self._groups_ready = False

    def ensure_groups(self) -> None:
        for stream in self.streams:
            try:
                self.client.xgroup_create(stream, GROUP, id="0", mkstream=True)
            except redis.ResponseError as exc:
                if "BUSYGROUP" not in str(exc):
                    raise
        self._groups_ready = True

    def archive(self, stream: str, entries) -> int:
        """Archive then ACK each entry; returns how many new letters were stored. A database error leaves the
        rest of the batch pending under this archiver, to be reclaimed: nothing is ACKed before it is stored."""
        created = 0
        done = []
        try:
            for message_id, raw in entries:
                if message_id is None:
                    continue
                if raw:
                    created += archive_entry(stream, text(message_id), raw).created
                done.append(message_id)
        finally:
            if done:
                self.client.xack(stream, GROUP, *done)
        return created

    def reclaim(self, min_idle_ms: int = RECLAIM_IDLE_MS) -> int:
        created = 0
        for stream in self.streams:
            cursor = "0-0"
            while True:
                response = self.client.xautoclaim(stream, GROUP, self.name, min_idle_ms, cursor, count=BATCH)
                cursor, entries = text(response[0]), response[1]
                created += self.archive(stream, entries)
                if not entries or cursor == "0-0":
                    break
        return created

    def read_once(self, block_ms: int | None) -> tuple[int, int]:
        """One XREADGROUP per stream (each dead-letter stream sits in its origin's Redis Cluster slot, so one
        call over all of them would be refused as CROSSSLOT); returns (entries read, letters created)."""
        if not self._groups_ready:
            self.ensure_groups()
        read = created = 0
        for stream in self.streams:
            try:
                # A RESP2 reply, [[stream, entries], ...]; redis-py types the RESP3 dict form with it.
                response: Any = self.client.xreadgroup(GROUP, self.name, {stream: ">"}, count=BATCH, block=block_ms)
            except redis.ResponseError as exc:
                if "NOGROUP" not in str(exc):
                    raise
                self.ensure_groups()
                continue
            for _, entries in response or []:
                read += len(entries)
                created += self.archive(stream, entries)
        return read, created

    def drain(self) -> int:
        """Archive everything waiting now (including entries a crashed archiver left); returns letters created."""
        self.ensure_groups()
        created = self.reclaim()
        while True:
            read, new = self.read_once(block_ms=None)
            created += new
            if not read:
                return created


def archive_entry(stream: str, message_id: str, raw) -> Archived:
    """Store one entry of a dead-letter stream: a letter under its origin, anything else as malformed."""
    try:
        fields = decode_fields(raw)
    except UndecodableEntry as exc:
        return dead_letter_archive_malformed(
            stream=stream,
            message_id=message_id,
            error=f"malformed dead letter: {exc}",
            payload=letter_payload(None, raw),
        )
    missing = [name for name in _LETTER_FIELDS if not fields.get(name)]
    if missing:
        return dead_letter_archive_malformed(
            stream=stream,
            message_id=message_id,
            error=f"malformed dead letter: without {', '.join(missing)}",
            payload=letter_payload(fields),
        )
    return dead_letter_archive_fields(fields)


def dlq_archive_drain(client: redis.Redis | None = None, *, timeout: float = DRAIN_TIMEOUT_SECONDS) -> int:
    """Archive everything waiting now; returns the letters created. The current dead-letter streams are read by
    their registered consumers on the runtime in burst mode (leases, owner-checked ACKs, reclaim of what a
    crashed archiver left, pauses while PostgreSQL is down), stopped after `timeout` s at the latest so the
    scheduled job always ends; what is left stays pending for the next run or for run_pipeline. Streams named
    by older versions, when they exist, are drained by DlqArchiver."""
    client = client or get_redis(raw=True)
    supervisor = Supervisor(list(ARCHIVE_CONSUMERS), concurrency=1, burst=True)
    deadline = threading.Timer(timeout, supervisor.request_stop)
    deadline.start()
    try:
        supervisor.run()
    finally:
        deadline.cancel()
    created = sum(
        runner.consumer.created for runner in supervisor.runners if isinstance(runner.consumer, _DeadLetterArchive)
    )
    legacy = tuple(stream for stream in LEGACY_DLQ_STREAMS if client.exists(stream))
    if legacy:
        created += DlqArchiver(client=client, streams=legacy).drain()
    return created


# --- the registered consumers (run by run_pipeline) ---------------------------------------------------

DEAD_LETTER_TYPE = "io.eigenflux.deadletter.v1"  # not on the wire: letters have no envelope


class _DeadLetterArchive(Consumer):
    """Archive one dead-letter stream; subclasses name the stream."""

    group = GROUP
    event_types = frozenset({DEAD_LETTER_TYPE})
    retry_policy = ARCHIVE_RETRIES
    dead_letter_stream = False  # the table is the last stop: on_dead_letter stores what cannot be parsed

    def parse(self, *, stream, group, message_id, fields, delivery_count, lease) -> Event:
        missing = [name for name in _LETTER_FIELDS if not fields.get(name)]
        if missing:
            raise MalformedEntry(f"dead letter without {', '.join(missing)}")
        return Event(
            stream=stream,
            group=group,
            message_id=message_id,
            delivery_count=delivery_count,
            envelope=fields,
            id=f"{fields['stream']}|{fields['group']}|{fields['message_id']}",
            type=DEAD_LETTER_TYPE,
            subject=fields.get("subject") or fields["message_id"],
            data={},
            replay=False,
            correlation_id="",
            causation_id="",
            traceparent="",
            lease=lease,
        )

    def __init__(self) -> None:
        self.created = 0  # letters this instance stored (the scheduled drain reports them)
        self._count_lock = threading.Lock()

    def _count(self, archived: Archived) -> None:
        with self._count_lock:
            self.created += archived.created

    def handle(self, event: Event) -> None:
        event.lease.check()
        self._count(dead_letter_archive_fields(event.envelope))

    def on_dead_letter(self, event: Event | None, reason: GiveUp) -> None:
        """Only malformed entries get here (retries are unlimited): they are archived as they are."""
        self._count(
            dead_letter_archive_malformed(
                stream=reason.stream, message_id=reason.message_id, error=reason.error, payload=reason.payload
            )
        )


@register
class ItemPublishDeadLetters(_DeadLetterArchive):
    name = "dlq-archive-item-publish"
    stream = dlq_stream(STREAM_ITEM_PUBLISH)


@register
class ItemEventsDeadLetters(_DeadLetterArchive):
    name = "dlq-archive-item-events"
    stream = dlq_stream(STREAM_ITEM_EVENTS)


@register
class ProfileUpdateDeadLetters(_DeadLetterArchive):
    name = "dlq-archive-profile-update"
    stream = dlq_stream(STREAM_PROFILE_UPDATE)


@register
class ItemStatsDeadLetters(_DeadLetterArchive):
    name = "dlq-archive-item-stats"
    stream = dlq_stream(STREAM_ITEM_STATS)


@register
class ReplayLogDeadLetters(_DeadLetterArchive):
    name = "dlq-archive-replay-log"
    stream = dlq_stream(STREAM_REPLAY_LOG)


ARCHIVE_CONSUMERS = (
    ItemPublishDeadLetters,
    ItemEventsDeadLetters,
    ProfileUpdateDeadLetters,
    ItemStatsDeadLetters,
    ReplayLogDeadLetters,
)
