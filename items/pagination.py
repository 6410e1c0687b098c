"""Opaque cursors. Lists newest first use keyset cursors on the item id, which are stable under concurrent
inserts (new items get larger ids and never shift the pages after the first). Search results are ordered by
relevance, not id, so a search cursor carries the position in the ranking plus a fingerprint of the search
that issued it (a cursor from another query is refused rather than silently paging something else)."""

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


def encode_search_cursor(offset: int, fingerprint: str) -> str:
    return base64.urlsafe_b64encode(f"s1:{offset}:{fingerprint}".encode()).decode().rstrip("=")


def decode_search_cursor(cursor: str | None, fingerprint: str) -> int:
    """The offset to continue from (0 for the first page); BadCursor if the cursor belongs to another search."""
    if not cursor:
        return 0
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        version, offset_text, issued_for = text.split(":", 2)
        offset = int(offset_text)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise BadCursor("cursor is not one this API issued") from None
    if version != "s1" or offset < 1:
        raise BadCursor("cursor is not one this API issued")
    if issued_for != fingerprint:
        raise BadCursor("cursor belongs to a different search (q, mode and filters must stay the same)")
    return offset


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
