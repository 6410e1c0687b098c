"""Outbox relay (docs/delivery.md#outbox): undispatched OutboxEvents -> their Redis stream, once each, in id order per
batch.

Safe in many processes: rows are claimed with SELECT … FOR UPDATE SKIP LOCKED. The XADD runs in a Lua script
with a once-mark keyed by the event id, so when the SQL update after it is lost (crash, rollback) the next
relay gets the existing stream id back instead of adding the event a second time.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

import psycopg
import redis
from django.conf import settings
from django.db import close_old_connections, connection, transaction
from django.utils import timezone
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from eigenflux.base import tracing
from eigenflux.base.dbpool import release_connection
from eigenflux.base.redis import get_redis, with_tag
from items.models import OutboxEvent
from items.outbox import NOTIFY_CHANNEL
from pipeline import metrics
from pipeline.runtime.scripts import Scripts
from pipeline.streams import stream_maxlen

log = logging.getLogger(__name__)


def once_mark_key(stream: str, event_id: str) -> str:
    """The once-mark of an event: hash-tagged with its stream, as the XADD script touches both (Redis Cluster)."""
    return f"eigenflux:outbox:sent:{with_tag(stream)}:{event_id}"


class OutboxRelay:
    name = "relay"  # a stream-engine service (pipeline.services)

    def __init__(
        self, *, batch_size: int | None = None, client: redis.Redis | None = None, poll_seconds: float | None = None
    ):
        self.batch_size = batch_size or settings.PIPELINE_RELAY_BATCH
        self.client = client or get_redis()
        self.scripts = Scripts(self.client)
        self.mark_ttl = settings.PIPELINE_RELAY_MARK_TTL_SECONDS
        self.poll_seconds = poll_seconds or settings.PIPELINE_RELAY_POLL_SECONDS
        # A row whose XADD failed (Redis OOM, READONLY during a failover...) waits a growing delay, capped,
        # and is then tried again: an event is never given up on, so no item is stranded behind it.
        self.max_backoff = settings.PIPELINE_RELAY_MAX_BACKOFF_SECONDS
        # For --burst: progress counters the supervisor compares between two looks.
        self.activity = 0
        self.empty_rounds = 0
        self.busy = False
        table = OutboxEvent._meta.db_table
        self._select = (
            f"SELECT id, stream, event_id, envelope, created_at FROM {table} "  # noqa: S608 - table name from meta
            "WHERE dispatched_at IS NULL AND (next_attempt_at IS NULL OR next_attempt_at <= now()) "
            "ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED"
        )
        self._mark_sent = (
            f"UPDATE {table} AS o SET dispatched_at = now(), stream_message_id = v.sid, attempts = o.attempts + 1, "  # noqa: S608
            "last_error = '' FROM unnest(%s::bigint[], %s::text[]) AS v(id, sid) WHERE o.id = v.id"
        )
        self._mark_failed = (
            f"UPDATE {table} AS o SET attempts = o.attempts + 1, last_error = v.err, "  # noqa: S608
            "next_attempt_at = now() + least(power(2, least(o.attempts, 16)), %s) * interval '1 second' "
            "FROM unnest(%s::bigint[], %s::text[]) AS v(id, err) WHERE o.id = v.id"
        )

    def relay_batch(self, *, after_xadd: Callable[[list], None] | None = None) -> int:
        """Claim one batch, XADD it (one pipelined round trip), mark it dispatched; returns rows handled.

        `after_xadd` runs between the XADD and the SQL update (tests use it to simulate a crash there).
        """
        marks = []
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute(self._select, [self.batch_size])
                rows = cursor.fetchall()
            if not rows:
                return 0
            results = self._xadd(rows)
            if after_xadd is not None:
                after_xadd(rows)
            sent_ids, sent_sids, failed_ids, failed_errors = [], [], [], []
            now = timezone.now()
            for (row_id, stream, event_id, _, created_at), result in zip(rows, results, strict=True):
                if isinstance(result, Exception):
                    failed_ids.append(row_id)
                    failed_errors.append(f"{type(result).__name__}: {result}"[:1000])
                    log.error("relay: outbox event %s to %s failed: %s", row_id, stream, result)
                    continue
                sent_ids.append(row_id)
                sent_sids.append(result)
                marks.append(once_mark_key(stream, str(event_id)))
                metrics.RELAY_DISPATCHED.labels(stream).inc()
                if isinstance(created_at, datetime):
                    metrics.RELAY_DELAY.observe(max(0.0, (now - created_at).total_seconds()))
            with connection.cursor() as cursor:
                if sent_ids:
                    cursor.execute(self._mark_sent, [sent_ids, sent_sids])
                if failed_ids:
                    cursor.execute(self._mark_failed, [self.max_backoff, failed_ids, failed_errors])
                    metrics.RELAY_ERRORS.inc(len(failed_ids))
        # Committed: the rows are dispatched and no relay will pick them again, so the marks have done their job.
        # (Only a crash between XADD and COMMIT leaves marks behind; they expire after the TTL.)
        if marks:
            try:
                self.client.unlink(*marks)
            except redis.RedisError:
                log.warning("relay: could not remove %d once-marks; they expire by themselves", len(marks))
        return len(rows)

    def _xadd(self, rows: list) -> list:
        """The once-marked XADDs of `rows` in one pipelined round trip: each row's stream id, or its error.

        A cluster pipeline does not load scripts the way a single-Redis one does, and a master that just
        restarted or took over has an empty script cache: on NOSCRIPT the script is loaded and the whole
        batch sent again, which the once-marks make harmless (an event already added returns its id)."""
        script = self.scripts.xadd_once
        envelopes = [json.loads(envelope) if isinstance(envelope, str) else envelope for _, _, _, envelope, _ in rows]
        # A `publish <stream>` span per event; the copy written to the stream carries its traceparent.
        spans = relay_spans([(row[1], envelope) for row, envelope in zip(rows, envelopes, strict=True)])
        try:
            results = self._xadd_rounds(rows, envelopes, script)
        except Exception as exc:
            end_relay_spans(spans, [exc] * len(rows))
            raise
        end_relay_spans(spans, results)
        return results

    def _xadd_rounds(self, rows: list, envelopes: list[dict], script) -> list:
        for attempt in range(2):
            pipe = self.client.pipeline(transaction=False)
            for (_, stream, event_id, _, _), envelope in zip(rows, envelopes, strict=True):
                flat = [str(part) for pair in envelope.items() for part in pair]
                # EVALSHA by name: redis-py's cluster pipeline refuses its evalsha() method, not the command.
                pipe.execute_command(
                    "EVALSHA",
                    script.sha,
                    2,
                    stream,
                    once_mark_key(stream, str(event_id)),
                    self.mark_ttl,
                    stream_maxlen(stream),
                    *flat,
                )
            results = pipe.execute(raise_on_error=False)
            if attempt or not any(isinstance(result, redis.exceptions.NoScriptError) for result in results):
                return results
            self.client.script_load(script.script)
        return results

    def drain(self) -> int:
        """Relay batches until none is full (rows locked by other relays are theirs)."""
        total = 0
        while True:
            count = self.relay_batch()
            total += count
            if count < self.batch_size:
                return total

    def drain_state(self) -> tuple[int, int] | None:
        """For a --burst run: None while a drain is under way, else (drains that moved events, empty drains)."""
        return None if self.busy else (self.activity, self.empty_rounds)

    def run(self, stop: threading.Event, *, poll_seconds: float | None = None) -> None:
        """Drain whenever woken (OUTBOX_WAKEUP, docs/delivery.md#waking-the-relay) and at least every poll interval.

        With NOTIFY (LISTEN on a dedicated connection) a notification wakes it at once; with after-commit NOTIFYs,
        coalesced by the publishers, it also drains once more OUTBOX_NOTIFY_COALESCE_MS after each one, for the
        commits whose NOTIFY was skipped. Polling alone, it drains every PIPELINE_RELAY_POLL_MIN_MS while it
        finds rows and doubles the wait on each empty round up to the poll interval."""
        poll = poll_seconds or self.poll_seconds
        listens = settings.OUTBOX_WAKEUP != "poll"
        coalesce = settings.OUTBOX_NOTIFY_COALESCE_MS / 1000 if listens else 0.0
        shortest = min(poll, settings.PIPELINE_RELAY_POLL_MIN_MS / 1000)
        interval = shortest
        recheck_at: float | None = None  # a drain must start at or after this (monotonic) time
        listener = None
        try:
            while not stop.is_set():
                if listens and listener is None:
                    listener = self._listen()
                if recheck_at is not None and time.monotonic() >= recheck_at:
                    recheck_at = None  # this drain is the one owed
                self.busy = True
                try:
                    close_old_connections()
                    count = self.drain()
                except Exception:
                    log.exception("relay: batch failed; retrying")
                    close_old_connections()
                    count = 0
                    stop.wait(min(poll, 1.0))
                finally:
                    self.busy = False
                if count:
                    self.activity += 1
                    interval = shortest
                    continue
                self.empty_rounds += 1
                release_connection()  # waiting: the connection goes back to the pool
                if not listens:
                    stop.wait(interval)
                    interval = min(poll, interval * 2)
                    continue
                timeout = poll if recheck_at is None else recheck_at - time.monotonic()
                if timeout <= 0:
                    continue
                listener, notified = self._wait(listener, stop, timeout)
                if notified and coalesce:
                    recheck_at = max(recheck_at or 0.0, time.monotonic() + coalesce)
        finally:
            if listener is not None:
                listener.close()
            connection.close()

    def _listen(self) -> psycopg.Connection | None:
        params = connection.settings_dict
        # LISTEN belongs to a session: behind a transaction-mode pooler it must go to the server directly.
        direct: dict[str, Any] = {"conninfo": settings.DATABASE_DIRECT_URL} if settings.DATABASE_DIRECT_URL else {}
        try:
            conn = psycopg.connect(
                **direct
                or {
                    "dbname": params["NAME"],
                    "user": params.get("USER") or None,
                    "password": params.get("PASSWORD") or None,
                    "host": params.get("HOST") or None,
                    "port": params.get("PORT") or None,
                },
                autocommit=True,
                connect_timeout=5,
                application_name="eigenflux-pipeline-listen",  # outside the pool: one per relay
            )
            conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
        except psycopg.Error:
            log.exception("relay: LISTEN failed; polling only")
            return None
        return conn

    def _wait(
        self, listener: psycopg.Connection | None, stop: threading.Event, timeout: float
    ) -> tuple[psycopg.Connection | None, bool]:
        """Up to `timeout` s for a notification (any already queued return at once): the listener to keep using,
        and whether a notification came."""
        if listener is None:
            stop.wait(timeout)
            return None, False
        notified = False
        try:
            for _ in listener.notifies(timeout=timeout, stop_after=1):
                notified = True
        except psycopg.Error:
            log.exception("relay: LISTEN connection lost; reconnecting")
            listener.close()
            time.sleep(min(timeout, 1.0))
            return None, False
        return listener, notified


# --- spans: `publish <stream>` per event XADDed (eigenflux.base.tracing) ----------------------------------------


def relay_spans(rows: list[tuple[str, dict[str, str]]]) -> list[trace.Span] | None:
    """One started `publish <stream>` span per (stream, envelope) about to be XADDed, each a child of the
    envelope's `traceparent`; the envelope's `traceparent` is replaced by the span's own (the copy written to
    the stream). None when tracing is off. End them with `end_relay_spans`."""
    tracer = tracing.tracer()
    if tracer is None:
        return None
    spans = []
    for stream, envelope in rows:
        span = tracer.start_span(
            f"publish {stream}",
            context=tracing.context_from_traceparent(envelope.get("traceparent")),
            kind=SpanKind.PRODUCER,
            attributes={
                **tracing.messaging_attributes(stream, "send", "publish"),
                "cloudevents.event_id": envelope.get("id", ""),
                "cloudevents.event_type": envelope.get("type", ""),
            },
        )
        envelope["traceparent"] = tracing.traceparent_of(span) or envelope.get("traceparent", "")
        spans.append(span)
    return spans


def end_relay_spans(spans: list[trace.Span] | None, results: list) -> None:
    """End the relay's spans with each XADD's result: the stream entry id, or the error's type."""
    if spans is None:
        return
    for span, result in zip(spans, results, strict=True):
        if isinstance(result, Exception):
            span.set_attribute("error.type", type(result).__name__)
            span.set_status(Status(StatusCode.ERROR, type(result).__name__))
        else:
            span.set_attribute("messaging.message.id", result.decode() if isinstance(result, bytes) else str(result))
        span.end()
