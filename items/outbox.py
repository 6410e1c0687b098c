"""Writing to the transactional outbox. The relay that drains it lives in pipeline.relay."""

from __future__ import annotations

from datetime import datetime

from django.db import connection

from eigenflux import tracing
from items.events import build_envelope
from items.models import OutboxEvent

NOTIFY_CHANNEL = "eigenflux_outbox"  # also named in the trigger of migration items.0007


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
    with tracing.outbox_write_span(stream=stream, event_type=event_type, traceparent=traceparent) as span:
        envelope = build_envelope(
            event_type=event_type,
            subject=subject,
            data=data,
            correlation_id=correlation_id,
            causation_id=causation_id,
            traceparent=(tracing.traceparent_of(span) if span is not None else None) or traceparent,
            replay=replay,
            target_group=target_group,
        )
        tracing.set_message_id(span, envelope["id"])
        event = OutboxEvent.objects.create(
            stream=stream,
            event_id=envelope["id"],
            event_type=event_type,
            subject=subject,
            envelope=envelope,
            next_attempt_at=not_before,
        )
    # The relays are woken by a trigger on this table (migration items.0007), at COMMIT.
    return event


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
