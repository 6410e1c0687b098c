"""Names and ids the stream engine uses: each stream's dead-letter stream `{<stream>}:dlq` (hash-tagged into its
stream's Redis Cluster slot, because the dead-letter script touches both in one call) and its `seen` index;
stream entry ids compared as Redis orders them; short replies (ids, consumer names) as text."""

from __future__ import annotations

from eigenflux.base.redis import slot_tag

DLQ_SUFFIX = ":dlq"


def dlq_stream(stream: str) -> str:
    """The dead-letter stream of `stream`, in the same slot: `{<stream>}:dlq` (the dead-letter script touches
    both in one call). A stream that already carries a hash tag keeps it: `<stream>:dlq`."""
    return f"{stream}{DLQ_SUFFIX}" if slot_tag(stream) != stream else f"{{{stream}}}{DLQ_SUFFIX}"


def dlq_seen_key(stream: str) -> str:
    """The index of entries of `stream` already dead-lettered (one letter per group and id), in the same slot."""
    return f"{dlq_stream(stream)}:seen"


def is_dlq_stream(stream: str) -> bool:
    return stream.endswith(DLQ_SUFFIX)


def text(value: bytes | str) -> str:
    """Ids, consumer names and other short replies compared or logged (never fails)."""
    if isinstance(value, str):
        return value
    return value.decode("utf-8", errors="backslashreplace")


def id_key(message_id: str) -> tuple[int, int]:
    """A stream entry id ("<ms>-<seq>") as numbers, so ids sort and compare as Redis orders them."""
    ms, _, seq = message_id.partition("-")
    return int(ms), int(seq or 0)
