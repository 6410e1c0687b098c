"""Opaque keyset cursors: newest first by item id, which is stable under concurrent inserts
(new items get larger ids and never shift the pages after the first)."""

from __future__ import annotations

import base64
import binascii

MAX_LIMIT = 100
DEFAULT_LIMIT = 20


class BadCursor(ValueError):
    pass


def encode_cursor(last_id: int) -> str:
    return base64.urlsafe_b64encode(f"v1:{last_id}".encode()).decode().rstrip("=")


def decode_cursor(cursor: str | None) -> int | None:
    """The id to continue below, or None for the first page."""
    if not cursor:
        return None
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        version, value = text.split(":", 1)
        last_id = int(value)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise BadCursor("cursor is not one this API issued") from None
    if version != "v1" or last_id < 1:
        raise BadCursor("cursor is not one this API issued")
    return last_id


def page(rows: list, limit: int) -> tuple[list, str | None]:
    """Split a list fetched with limit + 1 rows into the page and the next cursor."""
    if len(rows) > limit:
        rows = rows[:limit]
        return rows, encode_cursor(rows[-1].pk)
    return rows, None


def encode_impression_cursor(impression_id: str) -> str:
    """The unseen feed's cursor: which delivery (impression) to continue."""
    return base64.urlsafe_b64encode(f"u1:{impression_id}".encode()).decode().rstrip("=")


def decode_impression_cursor(cursor: str) -> str:
    try:
        version, value = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode().split(":", 1)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise BadCursor("cursor is not one this API issued") from None
    if version != "u1" or not value.startswith("imp_") or len(value) > 64:
        raise BadCursor("cursor is not one this API issued")
    return value
