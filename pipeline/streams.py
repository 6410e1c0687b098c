"""The pipeline's Redis streams and the helpers every module names, orders and bounds them with
(docs/architecture.md#streams-and-groups).

- Names: the five streams events travel on (their names are constants in items/events.py), each one's
  dead-letter stream `{<stream>}:dlq` (hash-tagged into its stream's Redis Cluster slot, because the
  dead-letter script touches both in one call) and its `seen` index, and the dead-letter stream names older
  versions wrote, which the scheduled drain still empties.
- Ids: stream entry ids compared as Redis orders them, and short replies (ids, consumer names) as text.
- Bounds: which streams are capped by length when written (the others are trimmed by MINID in housekeeping).
"""

from __future__ import annotations

from eigenflux.base.redis import slot_tag
from items.events import (
    STREAM_ITEM_EVENTS,
    STREAM_ITEM_PUBLISH,
    STREAM_ITEM_STATS,
    STREAM_PROFILE_UPDATE,
    STREAM_REPLAY_LOG,
)

DLQ_SUFFIX = ":dlq"

KNOWN_STREAMS = (STREAM_ITEM_PUBLISH, STREAM_ITEM_EVENTS, STREAM_PROFILE_UPDATE, STREAM_ITEM_STATS, STREAM_REPLAY_LOG)


def dlq_stream(stream: str) -> str:
    """The dead-letter stream of `stream`, in the same slot: `{<stream>}:dlq` (the dead-letter script touches
    both in one call). A stream that already carries a hash tag keeps it: `<stream>:dlq`."""
    return f"{stream}{DLQ_SUFFIX}" if slot_tag(stream) != stream else f"{{{stream}}}{DLQ_SUFFIX}"


def dlq_seen_key(stream: str) -> str:
    """The index of entries of `stream` already dead-lettered (one letter per group and id), in the same slot."""
    return f"{dlq_stream(stream)}:seen"


def is_dlq_stream(stream: str) -> bool:
    return stream.endswith(DLQ_SUFFIX)


DLQ_STREAMS: tuple[str, ...] = tuple(dlq_stream(stream) for stream in KNOWN_STREAMS)
# Drained when they exist: the dead-letter streams named without a hash tag (before Redis Cluster support),
# and those of versions whose archiver dead-lettered its own failures (unwrapped when archived).
LEGACY_DLQ_STREAMS: tuple[str, ...] = tuple(f"{stream}{DLQ_SUFFIX}" for stream in KNOWN_STREAMS) + tuple(
    f"{stream}{DLQ_SUFFIX}" for stream in DLQ_STREAMS + tuple(f"{origin}{DLQ_SUFFIX}" for origin in KNOWN_STREAMS)
)

# Trimmed by length at XADD (approximate MAXLEN); the ingest streams are trimmed by MINID instead.
STREAM_MAXLEN = {STREAM_ITEM_EVENTS: 20_000, STREAM_ITEM_STATS: 20_000}
DLQ_MAXLEN = 10_000


def stream_maxlen(stream: str) -> int:
    """Approximate MAXLEN for XADD to `stream`; 0 = never trim by length."""
    if is_dlq_stream(stream):
        return DLQ_MAXLEN
    return STREAM_MAXLEN.get(stream, 0)


def text(value: bytes | str) -> str:
    """Ids, consumer names and other short replies compared or logged (never fails)."""
    if isinstance(value, str):
        return value
    return value.decode("utf-8", errors="backslashreplace")


def id_key(message_id: str) -> tuple[int, int]:
    """A stream entry id ("<ms>-<seq>") as numbers, so ids sort and compare as Redis orders them."""
    ms, _, seq = message_id.partition("-")
    return int(ms), int(seq or 0)
