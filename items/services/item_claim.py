"""The enrichment pipeline's claim on an item (docs/enrichment.md): one conditional UPDATE … RETURNING that takes
the item for a stream entry and reads it, with its raw item, in the same statement.

The statement is bound on the server and prepared after a few runs on a connection (eigenflux.base.sqlrows),
and its row becomes the two model instances directly (sqlrows.model_from_row), without a QuerySet: the claim
runs once per item on the hot path.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from datetime import timedelta

from django.db import connection
from django.utils import timezone

from eigenflux.base.sqlrows import model_columns, model_from_row, server_bound_cursor
from items.models import ItemStatus, ProcessedItem, RawItem
from items.selectors import duplicate_sql, duplicate_window_start, raw_item_ref

CHECKPOINTS = (ItemStatus.COMPLETED, ItemStatus.DISCARDED, ItemStatus.DELETED, ItemStatus.REVIEW)


class Claim(enum.StrEnum):
    CLAIMED = "claimed"
    CHECKPOINT = "checkpoint"  # completed / discarded / deleted / review: nothing to do
    BUSY = "busy"  # another live claim holds it
    MISSING = "missing"


def claim_token(*, message_id: str, holder: str) -> str:
    """Claims are held by a stream entry *and* a holder (process), so a holder that lost the entry to a
    reclaim can no longer write, while the reclaimer takes the item over at once."""
    return f"{message_id}@{holder}"


_CLAIM_SQL: str | None = None


def _claim_sql() -> str:
    """One statement: take the item if claimable and return it (its columns, then its raw item's) as it is after
    the update, and its exact duplicate's id (items.selectors.exact_duplicate_of) or NULL."""
    global _CLAIM_SQL
    if _CLAIM_SQL is None:
        qn: Callable[..., str] = connection.ops.quote_name  # a concrete field's column is never None
        processed, raw = ProcessedItem._meta, RawItem._meta
        duplicate = duplicate_sql(
            content_hash=f"r.{qn('content_hash')}",
            item_id=f"r.{qn(raw.pk.column)}",
            author_id=f"r.{qn('author_id')}",
            since="%(since)s",
        )
        _CLAIM_SQL = (
            f"WITH claimed AS (UPDATE {qn(processed.db_table)} AS p SET status = %(processing)s, "  # noqa: S608
            "claimed_by = %(token)s, lease_expires_at = %(lease)s, attempts = p.attempts + 1, updated_at = %(now)s "
            f"WHERE p.{qn(processed.pk.column)} = %(id)s AND (p.status = ANY(%(open)s) OR (p.status = %(processing)s "
            "AND (p.lease_expires_at < %(now)s OR p.claimed_by LIKE %(mine)s))) "
            f"RETURNING {model_columns(ProcessedItem, 'p')}) "
            f"SELECT claimed.*, {model_columns(RawItem, 'r')}, ({duplicate}) FROM claimed "
            f"JOIN {qn(raw.db_table)} AS r ON r.{qn(raw.pk.column)} = claimed.{qn(processed.pk.column)}"
        )
    return _CLAIM_SQL


def item_claim(*, item_id: int, token: str, lease_seconds: float) -> tuple[Claim, ProcessedItem | None]:
    """Atomically take the item for enrichment: pending/failed, an expired claim, or a claim held for the
    same stream entry (which this consumer now owns: the previous owner crashed or lost its lease).

    The common case is one statement (UPDATE … RETURNING, with the raw item joined); only an item that could
    not be claimed is read again to say why."""
    state, item, _ = item_claim_with_duplicate(item_id=item_id, token=token, lease_seconds=lease_seconds)
    return state, item


def item_claim_with_duplicate(
    *, item_id: int, token: str, lease_seconds: float
) -> tuple[Claim, ProcessedItem | None, RawItem | None]:
    """item_claim(), and the claimed item's exact duplicate (items.selectors.exact_duplicate_of) read in the
    same statement: the enrichment's early duplicate gate costs no round trip of its own."""
    now = timezone.now()
    message_id = token.split("@", 1)[0]
    escaped = message_id.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    params = {
        "processing": ItemStatus.PROCESSING,
        "open": [ItemStatus.PENDING, ItemStatus.FAILED],
        "token": token,
        "lease": now + timedelta(seconds=lease_seconds),
        "now": now,
        "id": item_id,
        "mine": f"{escaped}@%",
        "since": duplicate_window_start(),
    }
    with server_bound_cursor() as cursor:
        cursor.execute(_claim_sql(), params)
        row = cursor.fetchone()
    if row is not None:
        item = model_from_row(ProcessedItem, row)
        item.raw = model_from_row(RawItem, row[len(ProcessedItem._meta.concrete_fields) :])
        return Claim.CLAIMED, item, None if row[-1] is None else raw_item_ref(row[-1])
    item = ProcessedItem.objects.select_related("raw").filter(pk=item_id).first()
    if item is None:
        return Claim.MISSING, None, None
    if item.status in CHECKPOINTS:
        return Claim.CHECKPOINT, item, None
    return Claim.BUSY, item, None
