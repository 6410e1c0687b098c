"""Raw stream entries as Redis returns them (bytes), decoded field by field.

The runtime reads with a client that does not decode replies: one entry that is not UTF-8 must not fail the
read of its whole batch (nor an XAUTOCLAIM, which would then claim the same batch again every cycle). Each
entry is decoded on its own; one that cannot be is malformed and is dead-lettered with its bytes in base64,
so a person can still see exactly what was written.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping

from pipeline.runtime.event import MalformedEntry
from pipeline.runtime.naming import text

RawFields = Mapping[bytes, bytes]


class UndecodableEntry(MalformedEntry):
    """A field name or value of the entry is not valid UTF-8."""


def decode_fields(raw: RawFields) -> dict[str, str]:
    """Every field name and value as str, or UndecodableEntry naming the first field that is not UTF-8."""
    fields: dict[str, str] = {}
    for index, (key, value) in enumerate(raw.items()):
        try:
            name = key.decode("utf-8") if isinstance(key, bytes) else key
        except UnicodeDecodeError as exc:
            raise UndecodableEntry(
                f"field #{index + 1} has a name that is not UTF-8 ({exc.reason} at byte {exc.start})"
            ) from None
        try:
            fields[name] = value.decode("utf-8") if isinstance(value, bytes) else value
        except UnicodeDecodeError as exc:
            raise UndecodableEntry(
                f"field {name!r} is not UTF-8 ({exc.reason}: byte 0x{value[exc.start]:02x} at position {exc.start})"
            ) from None
    return fields


def lenient_fields(raw: RawFields) -> dict[str, str]:
    """For display and letter headers only: undecodable bytes shown as backslash escapes."""
    return {text(key): text(value) for key, value in raw.items()}


def base64_fields(raw: RawFields, *, max_chars: int) -> dict[str, object]:
    """The entry's exact bytes, base64-encoded pair by pair, cut to about `max_chars` (marked when cut)."""
    pairs: list[list[str]] = []
    total = 0
    truncated = False
    for key, value in raw.items():
        pair = [base64.b64encode(_bytes(key)).decode("ascii"), base64.b64encode(_bytes(value)).decode("ascii")]
        size = len(pair[0]) + len(pair[1])
        if total + size > max_chars:
            truncated = True
            break
        total += size
        pairs.append(pair)
    payload: dict[str, object] = {"_encoding": "base64", "_fields": pairs}
    if truncated:
        payload["_truncated"] = "1"
    return payload


def _bytes(value: bytes | str) -> bytes:
    return value if isinstance(value, bytes) else value.encode("utf-8")
