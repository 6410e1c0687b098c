"""cg:dlq:archive: copies every `<stream>:dlq` entry into the DeadLetter table (idempotent by origin).

Dead-letter entries are not CloudEvents envelopes (pipeline.runtime.deadletter writes flat letter fields:
stream, group, message_id, error_class, error, payload, failed_at, ...). Two ways read them, both in the
group cg:dlq:archive:
- the registered consumers at the end of this module (one per dead-letter stream), which `run_pipeline`
  runs like any other: they override `parse` to read letter fields instead of an envelope;
- DlqArchiver, which the scheduled auto-requeue job (pipeline.deadletters) uses to drain the streams
  before it looks for letters.
Archiving is idempotent by origin (stream, group, message id), so either may see an entry twice.
"""

from __future__ import annotations

import logging
import os
import socket
import uuid

import redis

from eigenflux.redis import get_redis
from items.events import STREAM_ITEM_EVENTS, STREAM_ITEM_PUBLISH, STREAM_ITEM_STATS, STREAM_PROFILE_UPDATE
from pipeline.runtime import Consumer, Event, register
from pipeline.runtime.event import MalformedEntry

log = logging.getLogger(__name__)

GROUP = "cg:dlq:archive"
DLQ_STREAMS: tuple[str, ...] = tuple(
    f"{stream}:dlq" for stream in (STREAM_ITEM_PUBLISH, STREAM_ITEM_EVENTS, STREAM_PROFILE_UPDATE, STREAM_ITEM_STATS)
)
# Entries pending this long under another archiver (which crashed) are taken over.
RECLAIM_IDLE_MS = 60_000
BATCH = 100


class DlqArchiver:
    def __init__(self, *, client: redis.Redis | None = None, streams: tuple[str, ...] = DLQ_STREAMS):
        self.client = client or get_redis()
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
        """Archive then ACK each entry; returns how many new letters were stored."""
        from pipeline.deadletters import dead_letter_archive_fields  # models: after django.setup() in main()

        created = 0
        done = []
        for message_id, fields in entries:
            if message_id is None:
                continue
            if fields:
                created += dead_letter_archive_fields(fields).created
            done.append(message_id)
        if done:
            self.client.xack(stream, GROUP, *done)
        return created

    def reclaim(self, min_idle_ms: int = RECLAIM_IDLE_MS) -> int:
        created = 0
        for stream in self.streams:
            cursor = "0-0"
            while True:
                response = self.client.xautoclaim(stream, GROUP, self.name, min_idle_ms, cursor, count=BATCH)
                cursor, entries = response[0], response[1]
                created += self.archive(stream, entries)
                if not entries or cursor in ("0-0", b"0-0"):
                    break
        return created

    def read_once(self, block_ms: int | None) -> tuple[int, int]:
        """One XREADGROUP over every stream; returns (entries read, letters created)."""
        if not self._groups_ready:
            self.ensure_groups()
        try:
            response = self.client.xreadgroup(
                GROUP, self.name, dict.fromkeys(self.streams, ">"), count=BATCH, block=block_ms
            )
        except redis.ResponseError as exc:
            if "NOGROUP" not in str(exc):
                raise
            self.ensure_groups()
            return 0, 0
        read = created = 0
        for stream, entries in response or []:
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


def dlq_archive_drain(client: redis.Redis | None = None) -> int:
    return DlqArchiver(client=client).drain()


# --- the registered consumers (run by run_pipeline) ---------------------------------------------------

DEAD_LETTER_TYPE = "io.eigenflux.deadletter.v1"  # not on the wire: letters have no envelope


class _DeadLetterArchive(Consumer):
    """Archive one dead-letter stream; subclasses name the stream."""

    group = GROUP
    event_types = frozenset({DEAD_LETTER_TYPE})

    def parse(self, *, stream, group, message_id, fields, delivery_count, lease) -> Event:
        missing = [name for name in ("stream", "group", "message_id") if not fields.get(name)]
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

    def handle(self, event: Event) -> None:
        from pipeline.deadletters import dead_letter_archive_fields

        event.lease.check()
        dead_letter_archive_fields(event.envelope)


@register
class ItemPublishDeadLetters(_DeadLetterArchive):
    name = "dlq-archive-item-publish"
    stream = f"{STREAM_ITEM_PUBLISH}:dlq"


@register
class ItemEventsDeadLetters(_DeadLetterArchive):
    name = "dlq-archive-item-events"
    stream = f"{STREAM_ITEM_EVENTS}:dlq"


@register
class ProfileUpdateDeadLetters(_DeadLetterArchive):
    name = "dlq-archive-profile-update"
    stream = f"{STREAM_PROFILE_UPDATE}:dlq"


@register
class ItemStatsDeadLetters(_DeadLetterArchive):
    name = "dlq-archive-item-stats"
    stream = f"{STREAM_ITEM_STATS}:dlq"
