"""The pipeline's Redis streams and the helpers every module names, orders and bounds them with
(docs/architecture.md#streams-and-groups).

- Names: the five streams events travel on (their names are constants in items/events.py), their dead-letter
  streams (named by the stream engine: pipeline.runtime.naming, re-exported here with its id helpers), and
  the dead-letter stream names older versions wrote, which the scheduled drain still empties.
- Bounds: which streams are capped by length when written (the others are trimmed by MINID in housekeeping).
"""

from __future__ import annotations

from items.events import (
    STREAM_ITEM_EVENTS,
    STREAM_ITEM_PUBLISH,
    STREAM_ITEM_STATS,
    STREAM_PROFILE_UPDATE,
    STREAM_REPLAY_LOG,
)
from pipeline.runtime.naming import DLQ_SUFFIX, dlq_seen_key, dlq_stream, id_key, is_dlq_stream, text

KNOWN_STREAMS = (STREAM_ITEM_PUBLISH, STREAM_ITEM_EVENTS, STREAM_PROFILE_UPDATE, STREAM_ITEM_STATS, STREAM_REPLAY_LOG)


# The engine's names and ids, part of this module's vocabulary for the application's modules.
__all__ = ["DLQ_SUFFIX", "dlq_seen_key", "dlq_stream", "id_key", "is_dlq_stream", "text"]

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
