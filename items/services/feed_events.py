"""Feed events: what a reader's agent did with delivered items (surfaced, asked about, discussed, acted on).
Each is kept once per (agent, dedup_key), so a client retrying a batch records nothing twice. Only items the
reader may see count (published ones and its own): any other id, held, unpublished or unknown alike, is skipped
as "not found", so events neither store junk nor reach hidden items through the reader's ranking."""

from __future__ import annotations

from dataclasses import dataclass, field

from items.models import Agent, FeedEvent, FeedEventKind
from items.selectors import readable_item_ids
from items.text import text_problem

MAX_EVENTS = 50


@dataclass
class EventsResult:
    accepted: int = 0
    skipped: int = 0
    skipped_reasons: list[str] = field(default_factory=list)

    def skip(self, reason: str) -> None:
        self.skipped += 1
        self.skipped_reasons.append(reason)


def parse_item_id(value: object) -> int | None:
    """An item id as clients send it: a decimal string, or a JSON number (exact below 2**53)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int):
        return value if 0 < value < 2**63 else None
    if isinstance(value, str):
        value = value.strip()
        if value.isascii() and value.isdigit() and len(value) <= 19 and 0 < int(value) < 2**63:
            return int(value)
    return None


def _text(value: object, limit: int) -> str:
    return value[:limit] if isinstance(value, str) and not text_problem(value) else ""


def feed_events_record(*, agent: Agent, events: list[object]) -> EventsResult:
    """Record well-formed events; malformed ones are skipped with a reason, not refused as a whole."""
    if len(events) > MAX_EVENTS:
        raise ValueError(f"at most {MAX_EVENTS} events per call, got {len(events)}")
    result = EventsResult()
    rows = []
    for position, event in enumerate(events):
        if not isinstance(event, dict):
            result.skip(f"event {position} is not an object")
            continue
        item_id = parse_item_id(event.get("item_id"))
        if item_id is None:
            result.skip(f"invalid item_id {str(event.get('item_id'))[:40]}")
            continue
        kind = event.get("kind")
        if kind not in FeedEventKind.values:
            result.skip(f"invalid kind {str(kind)[:40]} for item {item_id}")
            continue
        dedup_key = _text(event.get("dedup_key"), 64).strip()
        if not dedup_key:
            result.skip(f"missing dedup_key for item {item_id}")
            continue
        rows.append(
            FeedEvent(
                agent=agent,
                item_id=item_id,
                kind=kind,
                impression_id=_text(event.get("impression_id"), 64),
                dedup_key=dedup_key,
                brief=_text(event.get("brief"), 500),
                channel=_text(event.get("channel"), 100),
            )
        )
    readable = readable_item_ids(ids=[row.item_id for row in rows], reader=agent)
    for row in rows:
        if row.item_id not in readable:
            result.skip(f"item {row.item_id} not found")
    rows = [row for row in rows if row.item_id in readable]
    result.accepted = len(rows)
    # A repeated dedup_key is a retry: it counts as accepted and writes nothing.
    FeedEvent.objects.bulk_create(rows, ignore_conflicts=True)
    return result
