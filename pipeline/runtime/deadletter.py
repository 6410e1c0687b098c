"""Dead-lettering one entry: the Lua script appends to `<stream>:dlq` and ACKs, once per (group, id)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import redis

from pipeline.runtime.scripts import Scripts

DLQ_MAXLEN = 10_000  # SPEC §5.2
ERROR_MAX_CHARS = 2000
PAYLOAD_FIELD_MAX_CHARS = 1024
PAYLOAD_MAX_CHARS = 8192


def dlq_stream(stream: str) -> str:
    return f"{stream}:dlq"


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
    scripts: Scripts | None = None,
) -> str | None:
    """Dead-letter an entry owned by `consumer`. Returns the DLQ entry id; "" if it was already
    dead-lettered (no second entry is written); None if `consumer` does not own it (nothing written)."""
    fields = fields or {}
    letter = {
        "stream": stream,
        "group": group,
        "message_id": message_id,
        "event_id": fields.get("id", ""),
        "subject": fields.get("subject", ""),
        "event_type": fields.get("type", ""),
        "delivery_count": str(delivery_count),
        "error_class": error_class,
        "error": error[:ERROR_MAX_CHARS],
        "payload": truncate_payload(fields),
        "failed_at": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
        "consumer": consumer,
    }
    flat = [part for pair in letter.items() for part in pair]
    scripts = scripts or Scripts(client)
    dlq = dlq_stream(stream)
    result = scripts.dead_letter(
        keys=[stream, dlq, f"{dlq}:seen"], args=[group, consumer, message_id, DLQ_MAXLEN, *flat]
    )
    if result == 0:
        return ""
    if result == -1:
        return None
    return result
