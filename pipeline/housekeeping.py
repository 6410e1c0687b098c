"""Stream housekeeping (docs/operations.md#housekeeping): MINID trimming of the ingest and dead-letter streams, the
stuck-item sweeper, pruning of consumers that are gone, and the lag poller that feeds the Prometheus gauges."""

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

from eigenflux.base.dbpool import release_connection
from eigenflux.base.redis import get_redis
from items.events import (
    ITEM_PUBLISHED,
    STREAM_ITEM_PUBLISH,
    STREAM_PROFILE_UPDATE,
    STREAM_REPLAY_LOG,
)
from items.models import ItemStatus, OutboxEvent, ProcessedItem
from items.outbox import outbox_event_create
from pipeline import metrics
from pipeline.runtime import liveness
from pipeline.runtime.consumer import Consumer
from pipeline.runtime.dead_lettering import ARCHIVE_GROUP
from pipeline.runtime.scripts import Scripts
from pipeline.streams import DLQ_STREAMS, KNOWN_STREAMS, dlq_stream, id_key, is_dlq_stream

log = logging.getLogger(__name__)

# Streams trimmed by MINID (the others are capped by MAXLEN when written). Dead-letter streams are trimmed the
# same way, below what the archive group has not finished, so no letter goes before it is archived.
# The impression log is trimmed the same way: a page event goes only once cg:replay:log has stored it.
INGEST_STREAMS = (STREAM_ITEM_PUBLISH, STREAM_PROFILE_UPDATE, STREAM_REPLAY_LOG)
ENRICHMENT_GROUP = "cg:item:publish"

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


def oldest_unfinished_id(client: redis.Redis, stream: str, group: dict) -> str:
    """The smallest id the group may still need: its oldest pending entry, else the one after last-delivered."""
    ms, seq = id_key(group["last-delivered-id"])
    candidates = [f"{ms}-{seq + 1}"]
    if group.get("pending"):
        summary = client.xpending(stream, group["name"])
        if summary.get("min"):
            candidates.append(summary["min"])
    return min(candidates, key=id_key)


def trim_stream(
    client: redis.Redis, stream: str, *, min_age_seconds: float | None = None, required_group: str | None = None
) -> str | None:
    """XTRIM MINID below every existing group's oldest unfinished entry, keeping every entry younger than
    `min_age_seconds` (default PIPELINE_STREAM_MIN_RETENTION_SECONDS); returns the MINID used, or None.

    An entry some group has not finished (pending, or after its last-delivered id) is never removed. Groups
    that do not exist are not waited for — a consumer that is not deployed would otherwise keep the stream
    growing forever — but a group created later still finds the entries of the retention window. Only
    `required_group` (the archive group, for a dead-letter stream) is waited for: without it, no trim.
    """
    age = settings.PIPELINE_STREAM_MIN_RETENTION_SECONDS if min_age_seconds is None else min_age_seconds
    try:
        groups = client.xinfo_groups(stream)
    except redis.ResponseError:
        return None  # no such stream
    if required_group is not None and required_group not in {g["name"] for g in groups}:
        return None
    now_ms = int(time.time() * 1000)
    candidates = [f"{max(now_ms - int(age * 1000), 0)}-0"]
    candidates += [oldest_unfinished_id(client, stream, g) for g in groups]
    minid = min(candidates, key=id_key)
    if id_key(minid) <= (0, 1):
        return None
    # Exact, not `~`: the count is reported, and the list is trimmed at most once a minute.
    removed = client.xtrim(stream, minid=minid, approximate=False)
    if removed:
        metrics.TRIMMED.labels(stream).inc(removed)
        log.info("trimmed %d entries of %s below %s", removed, stream, minid)
    return minid


def sweeper_deadline(consumer_cls: type[Consumer] | None = None) -> float:
    """How long an item may sit in pending/processing, untouched, before the sweeper looks at it.

    PIPELINE_SWEEPER_DEADLINE_SECONDS if set; else derived from what can legitimately keep an item still:
    the item claim's lease (a handler that died holding it), the entry's retry span (the backoff between its
    deliveries) and two entry leases (a dead consumer's entry is reclaimed after one, and handled within
    another). With the defaults, 120 + 6 + 60 = 186 s. Items whose stream entry is still alive are skipped
    anyway (sweep_stuck_items), so an item waiting in a long backlog is never published twice."""
    if settings.PIPELINE_SWEEPER_DEADLINE_SECONDS:
        return settings.PIPELINE_SWEEPER_DEADLINE_SECONDS
    if consumer_cls is None:
        from pipeline.consumers.item_publish import ItemPublishConsumer

        consumer_cls = ItemPublishConsumer
    consumer = consumer_cls()
    span = consumer.get_retry_policy().span()
    return settings.ENRICHMENT_LEASE_SECONDS + min(span, 3600.0) + 2 * consumer.get_lease_seconds()


def entry_alive(client: redis.Redis, stream: str, group: str, message_id: str) -> bool:
    """Will `group` still handle this entry? It is pending in the group, or not yet delivered to it (and still
    in the stream)."""
    pending = client.xpending_range(stream, group, message_id, message_id, 1)
    if pending:
        return True
    info = next((g for g in client.xinfo_groups(stream) if g["name"] == group), None)
    if info is None or id_key(message_id) <= id_key(info["last-delivered-id"]):
        return False
    return bool(client.xrange(stream, message_id, message_id, count=1))


def sweep_stuck_items(
    *, older_than_seconds: float | None = None, limit: int = 500, client: redis.Redis | None = None
) -> int:
    """Re-publish (through the outbox, replay set) items stranded in pending/processing past the deadline.

    Skipped: items whose publish event is still undispatched or was (re)published within the deadline, items
    whose processing lease has not expired, and items whose latest publish entry the enrichment group will
    still handle (waiting in a backlog, or pending under a live consumer). What is left lost its entry (Redis
    lost it, it was trimmed, or it was finished without the item moving on). Returns how many were re-published.
    """
    deadline = older_than_seconds if older_than_seconds is not None else sweeper_deadline()
    client = client or get_redis()
    now = timezone.now()
    cutoff = now - timedelta(seconds=deadline)
    publish_events = OutboxEvent.objects.filter(
        subject=Cast(OuterRef("pk"), output_field=CharField()), event_type=ITEM_PUBLISHED
    )
    recent_event = publish_events.filter(Q(dispatched_at__isnull=True) | Q(created_at__gt=cutoff))
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
        latest = OutboxEvent.objects.filter(subject=str(item_id), event_type=ITEM_PUBLISHED)
        message_id = latest.order_by("-id").values_list("stream_message_id", flat=True).first()
        try:
            if message_id and entry_alive(client, STREAM_ITEM_PUBLISH, ENRICHMENT_GROUP, message_id):
                continue
        except redis.ResponseError:
            pass  # no stream or group any more: the entry is gone
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


def prune_consumers(client: redis.Redis, streams, *, idle_seconds: float | None = None) -> int:
    """Remove from their groups the consumers that are gone: no pending entries, not reporting alive, idle for
    `idle_seconds` (default PIPELINE_CONSUMER_PRUNE_SECONDS). Consumer names are unique per process, so
    without this every restart would leave one behind in every group. Returns how many were removed."""
    idle_ms = (settings.PIPELINE_CONSUMER_PRUNE_SECONDS if idle_seconds is None else idle_seconds) * 1000
    alive = liveness.live_names(client)
    scripts = Scripts(client)
    removed = 0
    for stream in streams:
        try:
            groups = client.xinfo_groups(stream)
        except redis.ResponseError:
            continue
        for group in groups:
            for consumer in client.xinfo_consumers(stream, group["name"]):
                name = consumer["name"]
                if consumer["pending"] or consumer["idle"] < idle_ms or name in alive:
                    continue
                # The script re-checks the pending list, so a consumer that just read something is kept.
                removed += scripts.delete_idle_consumer(keys=[stream], args=[group["name"], name])
    if removed:
        log.info("removed %d departed consumers from their groups", removed)
    return removed


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
    # clock_timestamp(), not now(): inside a longer transaction now() is its start, older than rows written since.
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count(*), COALESCE(EXTRACT(EPOCH FROM clock_timestamp() - min(created_at)), 0) "  # noqa: S608
            f"FROM {table} WHERE dispatched_at IS NULL "
            "AND NOT (attempts = 0 AND next_attempt_at IS NOT NULL AND next_attempt_at > now())"
        )
        count, age = cursor.fetchone()
    return int(count), float(age)


class Housekeeper:
    """Runs the jobs on their intervals in one thread. Trimming, sweeping and consumer pruning take a Redis
    lock so that one process does each per interval; the lag poll is per process (each exports the same
    gauges). A stream-engine service (pipeline.services)."""

    name = "housekeeping"

    def __init__(self, streams: set[str], *, client: redis.Redis | None = None):
        self.client = client or get_redis()
        self.streams = set(streams) | set(KNOWN_STREAMS)
        self.streams |= {dlq_stream(s) for s in self.streams if not is_dlq_stream(s)}

    def run(self, stop: threading.Event) -> None:
        jobs = [
            (settings.PIPELINE_LAG_POLL_SECONDS, self.poll, None),
            (settings.PIPELINE_TRIM_INTERVAL_SECONDS, self.trim, "eigenflux:lock:trim"),
            (settings.PIPELINE_SWEEPER_INTERVAL_SECONDS, self.sweep, "eigenflux:lock:sweeper"),
            (settings.PIPELINE_TRIM_INTERVAL_SECONDS, self.prune, "eigenflux:lock:prune-consumers"),
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
        for stream in INGEST_STREAMS:
            trim_stream(self.client, stream)
        for stream in DLQ_STREAMS:
            trim_stream(self.client, stream, required_group=ARCHIVE_GROUP)

    def sweep(self) -> None:
        sweep_stuck_items(client=self.client)

    def prune(self) -> None:
        prune_consumers(self.client, sorted(self.streams))
