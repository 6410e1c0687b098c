"""cg:audit: an append-only copy of every outcome event on stream:item:events (idempotent by event id); milestones
are recorded where they are reached (items.models.ItemMilestone), not here."""

from __future__ import annotations

from items.events import ITEM_MILESTONE, OUTCOME_TYPES, STREAM_ITEM_EVENTS
from pipeline.models import AuditEvent
from pipeline.runtime import Consumer, Event, register


@register
class AuditConsumer(Consumer):
    name = "audit"
    stream = STREAM_ITEM_EVENTS
    group = "cg:audit"
    event_types = OUTCOME_TYPES
    ignores = frozenset({ITEM_MILESTONE})

    def handle(self, event: Event) -> None:
        event.lease.check()
        AuditEvent.objects.bulk_create(
            [
                AuditEvent(
                    event_id=event.id,
                    stream=event.stream,
                    message_id=event.message_id,
                    event_type=event.type,
                    subject=event.subject,
                    envelope=event.envelope,
                )
            ],
            ignore_conflicts=True,  # a redelivered event is already recorded
        )
