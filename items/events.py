"""CloudEvents 1.0 envelopes in flat string fields (docs/architecture.md#events), as written to the outbox and the
streams."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime

from django.conf import settings

from eigenflux.base.envelope import MAX_ENVELOPE_BYTES

STREAM_ITEM_PUBLISH = "stream:item:publish"
STREAM_ITEM_EVENTS = "stream:item:events"
STREAM_PROFILE_UPDATE = "stream:profile:update"
STREAM_ITEM_STATS = "stream:item:stats"
# The impression log (docs/feed-log.md): one event per feed page served, persisted by cg:replay:log.
STREAM_REPLAY_LOG = "stream:replay:log"

ITEM_PUBLISHED = "io.eigenflux.item.published.v1"
ITEM_COMPLETED = "io.eigenflux.item.completed.v1"
ITEM_DISCARDED = "io.eigenflux.item.discarded.v1"
ITEM_FAILED = "io.eigenflux.item.failed.v1"
ITEM_DELETED = "io.eigenflux.item.deleted.v1"
# Held for a moderator (status `review`): by the pipeline, or pulled from the feeds by readers' reports.
ITEM_HELD = "io.eigenflux.item.held.v1"
ITEM_FEEDBACK = "io.eigenflux.item.feedback.v1"
ITEM_DELIVERED = "io.eigenflux.item.delivered.v1"
PROFILE_UPDATED = "io.eigenflux.profile.updated.v1"
FEED_PAGE_SERVED = "io.eigenflux.feed.page_served.v1"
# An item reached one of its author's milestones (a MilestoneRule): pushed to the author's WebSockets.
ITEM_MILESTONE = "io.eigenflux.item.milestone.v1"
OUTCOME_TYPES = frozenset({ITEM_COMPLETED, ITEM_DISCARDED, ITEM_FAILED, ITEM_DELETED, ITEM_HELD})

# The one registry of what each stream carries (docs/stream-runtime.md, "Event types"). Writing another type to a
# stream is refused (outbox_event_create); a consumer group declares which of its stream's types it handles and
# which it leaves to the others, and acknowledges the latter without handling them. A type on no list here is
# malformed wherever it is read.
STREAM_EVENT_TYPES: dict[str, frozenset[str]] = {
    STREAM_ITEM_PUBLISH: frozenset({ITEM_PUBLISHED}),
    STREAM_ITEM_EVENTS: OUTCOME_TYPES | {ITEM_MILESTONE},
    STREAM_PROFILE_UPDATE: frozenset({PROFILE_UPDATED}),
    STREAM_ITEM_STATS: frozenset({ITEM_FEEDBACK, ITEM_DELIVERED}),
    STREAM_REPLAY_LOG: frozenset({FEED_PAGE_SERVED}),
}


class UnregisteredEventType(ValueError):
    """An event type written to a stream whose registry (STREAM_EVENT_TYPES) does not list it."""


def check_stream_type(*, stream: str, event_type: str) -> None:
    """Refuse an event that its stream does not carry: every group reading the stream must have decided what to do
    with each type on it before one is written. A stream outside the registry (the stream engine's own tests and
    benchmarks) is not checked; every stream of the application is in it (tests/pipeline/test_event_routing.py)."""
    if stream in STREAM_EVENT_TYPES and event_type not in STREAM_EVENT_TYPES[stream]:
        raise UnregisteredEventType(
            f"event type {event_type!r} is not registered for stream {stream!r} (items.events.STREAM_EVENT_TYPES)"
        )


class EnvelopeTooLarge(ValueError):
    pass


def build_envelope(
    *,
    event_type: str,
    subject: str,
    data: dict,
    correlation_id: str | None = None,
    causation_id: str | None = None,
    traceparent: str | None = None,
    replay: bool = False,
    target_group: str | None = None,
) -> dict[str, str]:
    """`target_group` (the `targetgroup` extension attribute) limits a replay to one consumer group: the
    stream's other groups acknowledge it without handling it, since they already handled the original."""
    event_id = str(uuid.uuid4())
    envelope = {
        "specversion": "1.0",
        "id": event_id,
        "source": settings.EVENT_SOURCE,
        "type": event_type,
        "subject": subject,
        "time": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
        "datacontenttype": "application/json",
        "data": json.dumps(data, separators=(",", ":"), sort_keys=True),
        # The first event of a chain correlates with itself.
        "correlationid": correlation_id or event_id,
        "causationid": causation_id or "",
        "traceparent": traceparent or new_traceparent(),
        "replay": "1" if replay else "",
    }
    if target_group:
        envelope["targetgroup"] = target_group
    size = sum(len(k) + len(v.encode("utf-8")) for k, v in envelope.items())
    if size > MAX_ENVELOPE_BYTES:
        raise EnvelopeTooLarge(f"event {event_type} for {subject} is {size} bytes (limit {MAX_ENVELOPE_BYTES})")
    return envelope


def new_traceparent() -> str:
    """A W3C trace-context header value starting a new trace."""
    return f"00-{uuid.uuid4().hex}-{uuid.uuid4().hex[:16]}-01"
