"""Dead-lettering one entry: the Lua script appends to `{<stream>}:dlq` and ACKs, once per (group, id).

Every dead-letter stream is born with the archive group (`cg:dlq:archive`) already created, and it is trimmed
only below that group's unfinished entries (pipeline.housekeeping), so a letter can never be trimmed away
before the archiver has stored it.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime

import redis

from pipeline.runtime.entries import RawFields, base64_fields, lenient_fields
from pipeline.runtime.naming import dlq_seen_key, dlq_stream, text
from pipeline.runtime.scripts import Scripts

ARCHIVE_GROUP = "cg:dlq:archive"
ERROR_MAX_CHARS = 2000
PAYLOAD_FIELD_MAX_CHARS = 1024
PAYLOAD_MAX_CHARS = 8192
# How long the `seen` index remembers a dead-lettered (group, id). A second dead-letter call for the same
# entry within it writes nothing; later the entry is long ACKed, so the ownership check refuses it anyway.
SEEN_TTL_SECONDS = 24 * 3600


@dataclass(frozen=True)
class GiveUp:
    """Why the runtime gives up on an entry: what the consumer's `on_dead_letter` hook receives."""

    stream: str
    group: str
    message_id: str
    error_class: str  # "transient" (retries or deliveries exhausted) or "permanent" (malformed, refused)
    error: str
    delivery_count: int
    fields: dict[str, str] = field(default_factory=dict)  # as read (undecodable bytes backslash-escaped)
    payload: str = ""  # the letter's payload: the fields as JSON (truncated), or the bytes in base64


def truncate_payload(fields: dict[str, str] | None) -> str:
    """The entry's fields as JSON, each value cut to a size that keeps the whole letter small (still valid JSON)."""
    out: dict[str, str] = {}
    total = 0
    for key, value in (fields or {}).items():
        value = value if len(value) <= PAYLOAD_FIELD_MAX_CHARS else value[:PAYLOAD_FIELD_MAX_CHARS] + "…[truncated]"
        total += len(key) + len(value)
        if total > PAYLOAD_MAX_CHARS:
            out["_truncated"] = "1"
            break
        out[key] = value
    return json.dumps(out, ensure_ascii=False, separators=(",", ":"))


def raw_payload(raw: RawFields) -> str:
    """An entry that is not UTF-8, byte for byte in base64 (so a person can inspect exactly what was written)."""
    return json.dumps(base64_fields(raw, max_chars=PAYLOAD_MAX_CHARS), separators=(",", ":"))


def letter_payload(fields: dict[str, str] | None, raw: RawFields | None = None) -> str:
    """What a letter carries of its entry: the decoded fields, or the raw bytes when they did not decode."""
    return truncate_payload(fields) if fields is not None or raw is None else raw_payload(raw)


def dead_letter(
    client: redis.Redis,
    *,
    stream: str,
    group: str,
    consumer: str,
    message_id: str,
    fields: dict[str, str] | None,
    delivery_count: int,
    error_class: str,
    error: str,
    raw: RawFields | None = None,
    scripts: Scripts | None = None,
) -> str | None:
    """Dead-letter an entry owned by `consumer`. Returns the DLQ entry id; "" if it was already
    dead-lettered (no second entry is written); None if `consumer` does not own it (nothing written).

    `raw` (the entry's bytes) is given instead of `fields` for an entry that could not be decoded: the
    payload then carries the bytes in base64 and the letter's headers are decoded leniently.
    """
    shown = fields if fields is not None else (lenient_fields(raw) if raw is not None else {})
    payload = letter_payload(fields, raw)
    letter = {
        "stream": stream,
        "group": group,
        "message_id": message_id,
        "event_id": shown.get("id", "")[:64],
        "subject": shown.get("subject", "")[:64],
        "event_type": shown.get("type", "")[:100],
        "delivery_count": str(delivery_count),
        "error_class": error_class,
        "error": error[:ERROR_MAX_CHARS],
        "payload": payload,
        "failed_at": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
        "consumer": consumer,
    }
    flat = [part for pair in letter.items() for part in pair]
    scripts = scripts or Scripts(client)
    result = scripts.dead_letter(
        keys=[stream, dlq_stream(stream), dlq_seen_key(stream)],
        args=[group, consumer, message_id, f"{time.time():.3f}", SEEN_TTL_SECONDS, ARCHIVE_GROUP, *flat],
    )
    if result == 0:
        return ""
    if result == -1:
        return None
    return text(result)
