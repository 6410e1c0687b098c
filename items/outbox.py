"""Writing to the transactional outbox. The relay that drains it lives in pipeline.relay."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime

from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.utils import timezone
from opentelemetry import trace
from opentelemetry.trace import SpanKind

from eigenflux.base import tracing
from eigenflux.base.sqlrows import Rows
from items.events import build_envelope, check_stream_type
from items.models import OutboxEvent

log = logging.getLogger(__name__)

NOTIFY_CHANNEL = "eigenflux_outbox"
_NOTIFY_SQL = "SELECT pg_notify(%s, '')"


@contextmanager
def _traced_envelope(*, stream: str, traceparent: str | None, **fields) -> Iterator[dict[str, str]]:
    """An event's envelope built inside its `create <stream>` span: the span's context becomes the envelope's
    traceparent (a given one, e.g. a replay's, is continued instead) and the span carries the message id."""
    check_stream_type(stream=stream, event_type=fields["event_type"])
    with outbox_write_span(stream=stream, event_type=fields["event_type"], traceparent=traceparent) as span:
        own = tracing.traceparent_of(span) if span is not None else None
        envelope = build_envelope(traceparent=own or traceparent, **fields)
        tracing.set_message_id(span, envelope["id"])
        yield envelope


def outbox_event_create(
    *,
    stream: str,
    event_type: str,
    subject: str,
    data: dict,
    correlation_id: str | None = None,
    causation_id: str | None = None,
    traceparent: str | None = None,
    replay: bool = False,
    target_group: str | None = None,
    not_before: datetime | None = None,
) -> OutboxEvent:
    """Add an event to the outbox; must run inside the transaction of the change it announces. With
    `not_before`, the relays leave it alone until then (a delayed event)."""
    if not connection.in_atomic_block:
        raise RuntimeError("outbox_event_create must run inside transaction.atomic()")
    # Traced as `create <stream>`: its context becomes the event's traceparent, so whatever handles the event
    # continues this trace (a given traceparent, e.g. a replay's, is continued instead of the current span).
    with _traced_envelope(
        stream=stream,
        event_type=event_type,
        subject=subject,
        data=data,
        correlation_id=correlation_id,
        causation_id=causation_id,
        traceparent=traceparent,
        replay=replay,
        target_group=target_group,
    ) as envelope:
        event = OutboxEvent.objects.create(
            stream=stream,
            event_id=envelope["id"],
            event_type=event_type,
            subject=subject,
            envelope=envelope,
            next_attempt_at=not_before,
        )
    _wake_relays()
    return event


def outbox_event_rows(
    *,
    stream: str,
    event_type: str,
    subject: str,
    data: dict,
    correlation_id: str | None = None,
    causation_id: str | None = None,
    traceparent: str | None = None,
    replay: bool = False,
) -> Rows:
    """outbox_event_create()'s row, for a write that inserts it in its own statement only when its update changed
    the row it announces (eigenflux.base.sqlrows.update_carrying); the caller calls outbox_event_written() once
    that statement has inserted it, inside its transaction."""
    with _traced_envelope(
        stream=stream,
        event_type=event_type,
        subject=subject,
        data=data,
        correlation_id=correlation_id,
        causation_id=causation_id,
        traceparent=traceparent,
        replay=replay,
    ) as envelope:
        pass
    row = {
        "stream": stream,
        "event_id": envelope["id"],
        "event_type": event_type,
        "subject": subject,
        "envelope": envelope,
        "created_at": timezone.now(),
    }
    return Rows(OutboxEvent, [row], if_updated=True)


def outbox_event_written() -> None:
    """An outbox_event_rows() row was inserted in this transaction: the relays are woken as for any other."""
    if not connection.in_atomic_block:
        raise RuntimeError("outbox events are written inside transaction.atomic()")
    _wake_relays()


class _Coalescer:
    """When this process last sent an after-commit NOTIFY (monotonic seconds; 0 = never)."""

    last_sent = 0.0


def _wake_relays() -> None:
    """Tell the relays a row is coming, the way OUTBOX_WAKEUP says (docs/delivery.md#waking-the-relay). Never
    inside the transaction: a transaction that has sent a NOTIFY holds a database-wide lock from its commit until
    the commit is durable, which makes publishers' commits queue behind one another."""
    if settings.OUTBOX_WAKEUP == "after-commit":
        # Discarded with the transaction (or the savepoint) if it rolls back: only committed rows wake anyone.
        transaction.on_commit(notify_after_commit)


def notify_after_commit() -> bool:
    """NOTIFY the relays now, outside any transaction, unless this process did less than OUTBOX_NOTIFY_COALESCE_MS
    ago; returns whether it sent one.

    A skipped commit is not left waiting: it committed before (time of the last NOTIFY sent + window), and every
    relay woken by that NOTIFY drains again at least a window after it received it (pipeline.relay). The time is
    taken before sending and recorded only once the NOTIFY went out, so a failed one never covers later commits.
    """
    window = settings.OUTBOX_NOTIFY_COALESCE_MS / 1000
    now = time.monotonic()
    if window and now - _Coalescer.last_sent < window:
        return False
    try:
        # The request's own connection, in autocommit after its COMMIT: a one-statement transaction that takes
        # the NOTIFY lock for itself only. Fine behind a transaction-mode pooler (NOTIFY needs no session).
        with connection.cursor() as cursor:
            cursor.execute(_NOTIFY_SQL, [NOTIFY_CHANNEL])
    except DatabaseError:
        # The commit stands; the relays' poll fallback (PIPELINE_RELAY_POLL_SECONDS) picks the row up.
        log.warning("outbox: could not NOTIFY the relays after commit; they will find the row by polling")
        return False
    _Coalescer.last_sent = now
    return True


def outbox_events_prune(*, dispatched_before: datetime, batch: int = 5000) -> int:
    """Delete outbox rows dispatched before the cutoff, a batch per statement; returns how many. Undispatched
    rows are never touched: they are the relay's work."""
    table = OutboxEvent._meta.db_table
    sql = (
        f"DELETE FROM {table} WHERE id IN (SELECT id FROM {table} "  # noqa: S608 - table name from meta
        "WHERE dispatched_at IS NOT NULL AND dispatched_at < %s LIMIT %s FOR UPDATE SKIP LOCKED)"
    )
    deleted = 0
    while True:
        with connection.cursor() as cursor:
            cursor.execute(sql, [dispatched_before, batch])
            count = cursor.rowcount
        deleted += count
        if count < batch:
            return deleted


@contextmanager
def outbox_write_span(*, stream: str, event_type: str, traceparent: str | None) -> Iterator[trace.Span | None]:
    """`create <stream>` around an outbox insert: a child of `traceparent` when one is given (a replay, an outcome
    event), else of the current span (the publish request). Yields None when tracing is off."""
    tracer = tracing.tracer()
    if tracer is None:
        yield None
        return
    parent = tracing.context_from_traceparent(traceparent) if traceparent else None
    if parent is not None and not trace.get_current_span(parent).get_span_context().is_valid:
        parent = None  # a malformed value: the current span's trace rather than a new one
    with tracer.start_as_current_span(
        f"create {stream}",
        context=parent,
        kind=SpanKind.PRODUCER,
        attributes={
            **tracing.messaging_attributes(stream, "create", "create"),
            "cloudevents.event_type": event_type,
        },
        record_exception=False,
    ) as span:
        yield span
