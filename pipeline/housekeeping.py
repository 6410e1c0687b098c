"""Stream housekeeping (SPEC §5.2, §5.4): MINID trimming of the ingest streams, the stuck-item sweeper and the
lag poller that feeds the Prometheus gauges."""

from __future__ import annotations

import logging
import threading
import time
from datetime import timedelta

import redis
from django.conf import settings
from django.db import close_old_connections, connection, transaction
from django.db.models import CharField, Exists, OuterRef, Q
from django.db.models.functions import Cast
from django.utils import timezone

from eigenflux.dbpool import release_connection
from eigenflux.redis import get_redis
from items.events import (
    ITEM_PUBLISHED,
    STREAM_ITEM_EVENTS,
    STREAM_ITEM_PUBLISH,
    STREAM_ITEM_STATS,
    STREAM_PROFILE_UPDATE,
)
from items.models import ItemStatus, OutboxEvent, ProcessedItem
from items.outbox import outbox_event_create
from pipeline import metrics

log = logging.getLogger(__name__)

# SPEC §5.2: the groups every ingest stream serves. Trimming waits until all of them exist, so an entry is
# never trimmed before a group that has not been created yet could read it.
INGEST_STREAM_GROUPS: dict[str, frozenset[str]] = {
    STREAM_ITEM_PUBLISH: frozenset({"cg:item:publish", "cg:official:firstbroadcast"}),
    STREAM_PROFILE_UPDATE: frozenset({"cg:profile:update", "cg:official:welcome"}),
}
KNOWN_STREAMS = (STREAM_ITEM_PUBLISH, STREAM_ITEM_EVENTS, STREAM_PROFILE_UPDATE, STREAM_ITEM_STATS)

# Counts entries after a group's last-delivered id, for Redis < 7 whose XINFO GROUPS has no `lag`.
# KEYS[1] stream; ARGV: last-delivered id, cap -> count (capped).
_COUNT_AFTER = """
local n, start, cap = 0, '(' .. ARGV[1], tonumber(ARGV[2])
while n < cap do
  local batch = redis.call('XRANGE', KEYS[1], start, '+', 'COUNT', 1000)
  if #batch == 0 then break end
  n = n + #batch
  start = '(' .. batch[#batch][1]
end
return n
"""
LAG_COUNT_CAP = 1_000_000


def _id_key(message_id: str) -> tuple[int, int]:
    ms, _, seq = message_id.partition("-")
    return int(ms), int(seq or 0)


def oldest_unfinished_id(client: redis.Redis, stream: str, group: dict) -> str:
    """The smallest id the group may still need: its oldest pending entry, else the one after last-delivered."""
    ms, seq = _id_key(group["last-delivered-id"])
    candidates = [f"{ms}-{seq + 1}"]
    if group.get("pending"):
        summary = client.xpending(stream, group["name"])
        if summary.get("min"):
            candidates.append(summary["min"])
    return min(candidates, key=_id_key)


def trim_stream(client: redis.Redis, stream: str, expected_groups: frozenset[str] | None = None) -> str | None:
    """XTRIM MINID below every group's oldest unfinished entry; returns the MINID used, or None if skipped.

    An entry with id >= every group's (oldest pending, last-delivered) minimum is kept, so nothing a group has
    not finished is removed. Skipped while an expected group is missing (it could still want old entries).
    """
    try:
        groups = client.xinfo_groups(stream)
    except redis.ResponseError:
        return None  # no such stream
    if not groups:
        return None
    names = {g["name"] for g in groups}
    expected = INGEST_STREAM_GROUPS.get(stream, frozenset()) if expected_groups is None else expected_groups
    if expected - names:
        log.debug("trim %s skipped: groups %s missing", stream, sorted(expected - names))
        return None
    minid = min((oldest_unfinished_id(client, stream, g) for g in groups), key=_id_key)
    if _id_key(minid) <= (0, 1):
        return None
    # Exact, not `~`: the count is reported, and the list is trimmed at most once a minute.
    removed = client.xtrim(stream, minid=minid, approximate=False)
    if removed:
        metrics.TRIMMED.labels(stream).inc(removed)
        log.info("trimmed %d entries of %s below %s", removed, stream, minid)
    return minid


def sweep_stuck_items(*, older_than_seconds: float | None = None, limit: int = 500) -> int:
    """Re-publish (through the outbox, replay set) items stuck in pending/processing past the deadline.

    Skipped: items whose publish event is still undispatched or was (re)published within the deadline, and
    items whose processing lease has not expired. Returns how many were re-published.
    """
    deadline = older_than_seconds if older_than_seconds is not None else settings.PIPELINE_SWEEPER_DEADLINE_SECONDS
    now = timezone.now()
    cutoff = now - timedelta(seconds=deadline)
    recent_event = OutboxEvent.objects.filter(
        subject=Cast(OuterRef("pk"), output_field=CharField()), event_type=ITEM_PUBLISHED
    ).filter(Q(dispatched_at__isnull=True) | Q(created_at__gt=cutoff))
    stuck = (
        ProcessedItem.objects.filter(updated_at__lt=cutoff)
        .filter(
            Q(status=ItemStatus.PENDING)
            | Q(status=ItemStatus.PROCESSING, lease_expires_at__isnull=True)
            | Q(status=ItemStatus.PROCESSING, lease_expires_at__lt=now)
        )
        .filter(~Exists(recent_event))
        .order_by("updated_at")
        .values_list("pk", "author_id")[:limit]
    )
    count = 0
    for item_id, author_id in stuck:
        with transaction.atomic():
            outbox_event_create(
                stream=STREAM_ITEM_PUBLISH,
                event_type=ITEM_PUBLISHED,
                subject=str(item_id),
                data={"item_id": str(item_id), "author_id": str(author_id)},
                replay=True,
            )
        count += 1
    if count:
        metrics.SWEEPER_REPUBLISHED.inc(count)
        log.warning("sweeper: re-published %d stuck items", count)
    return count


def group_lag(client: redis.Redis, stream: str, group: dict) -> int:
    """Entries not yet delivered to the group: XINFO's `lag` on Redis 7, else counted (capped)."""
    lag = group.get("lag")
    if lag is None:
        lag = client.register_script(_COUNT_AFTER)(keys=[stream], args=[group["last-delivered-id"], LAG_COUNT_CAP])
    return int(lag)


def poll_lag(client: redis.Redis, streams: set[str]) -> dict[str, dict]:
    """Length, and pending / lag / consumers per group, of each stream; sets the gauges. Returns the figures."""
    figures: dict[str, dict] = {}
    for stream in sorted(streams):
        try:
            length = client.xlen(stream)
            groups = client.xinfo_groups(stream) if length or client.exists(stream) else []
        except redis.ResponseError:
            continue
        metrics.LENGTH.labels(stream).set(length)
        per_group = {}
        for group in groups:
            lag = group_lag(client, stream, group)
            per_group[group["name"]] = {"pending": group["pending"], "lag": lag, "consumers": group["consumers"]}
            metrics.PENDING.labels(stream, group["name"]).set(group["pending"])
            metrics.LAG.labels(stream, group["name"]).set(lag)
            metrics.CONSUMERS.labels(stream, group["name"]).set(group["consumers"])
        figures[stream] = {"length": length, "groups": per_group}
    backlog, oldest = outbox_backlog()
    metrics.OUTBOX_BACKLOG.set(backlog)
    metrics.OUTBOX_OLDEST_AGE.set(oldest)
    figures["outbox"] = {"backlog": backlog, "oldest_age_seconds": oldest}
    return figures


def outbox_backlog() -> tuple[int, float]:
    """Undispatched events and the oldest one's age; events scheduled for later (delayed, never tried) are not
    backlog until they are due."""
    table = OutboxEvent._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count(*), COALESCE(EXTRACT(EPOCH FROM now() - min(created_at)), 0) "  # noqa: S608 - table name
            f"FROM {table} WHERE dispatched_at IS NULL "
            "AND NOT (attempts = 0 AND next_attempt_at IS NOT NULL AND next_attempt_at > now())"
        )
        count, age = cursor.fetchone()
    return int(count), float(age)


class Housekeeper:
    """Runs the three jobs on their intervals in one thread. Trimming and sweeping take a Redis lock so that
    one process does each per interval; the lag poll is per process (each exports the same gauges)."""

    def __init__(self, streams: set[str], *, client: redis.Redis | None = None):
        self.client = client or get_redis()
        self.streams = set(streams) | set(KNOWN_STREAMS)
        self.streams |= {f"{s}:dlq" for s in self.streams}

    def run(self, stop: threading.Event) -> None:
        jobs = [
            (settings.PIPELINE_LAG_POLL_SECONDS, self.poll, None),
            (settings.PIPELINE_TRIM_INTERVAL_SECONDS, self.trim, "eigenflux:lock:trim"),
            (settings.PIPELINE_SWEEPER_INTERVAL_SECONDS, self.sweep, "eigenflux:lock:sweeper"),
        ]
        next_run = [time.monotonic()] * len(jobs)
        try:
            while not stop.is_set():
                for i, (interval, job, lock) in enumerate(jobs):
                    if time.monotonic() < next_run[i]:
                        continue
                    next_run[i] = time.monotonic() + interval
                    try:
                        if lock and not self.client.set(lock, "1", nx=True, ex=max(1, int(interval * 0.9))):
                            continue
                        close_old_connections()
                        job()
                    except Exception:
                        log.exception("housekeeping job %s failed", job.__name__)
                release_connection()  # idle until the next job: the connection goes back to the pool
                stop.wait(max(0.05, min(next_run) - time.monotonic()))
        finally:
            connection.close()

    def poll(self) -> None:
        poll_lag(self.client, self.streams)

    def trim(self) -> None:
        for stream in INGEST_STREAM_GROUPS:
            trim_stream(self.client, stream)

    def sweep(self) -> None:
        sweep_stuck_items()
