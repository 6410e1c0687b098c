"""Stored lexicon concepts (ProcessedItem.concepts, docs/feed.md#how-fast): written when an item completes; this
fills them for items completed before the column existed, and recomputes them all after the search lexicon
changes (`manage.py feed_concepts --all`)."""

from __future__ import annotations

from django.db import connection, transaction

from items.feed_ranking.concepts import item_concepts
from items.models import ProcessedItem, RawItem

BATCH = 2000
ITEMS = ProcessedItem._meta.db_table
RAW = RawItem._meta.db_table


def item_concepts_refresh(*, everything: bool = False, batch: int = BATCH) -> int:
    """Compute and store the concepts of completed items (those without any, or with `everything` all of them),
    `batch` rows per transaction; returns how many rows were written."""
    if batch < 1:
        raise ValueError("batch must be at least 1")
    missing = "" if everything else " AND p.concepts IS NULL"
    written, after = 0, 0
    while True:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(
                f"SELECT p.raw_id, r.content, p.keywords FROM {ITEMS} p "  # noqa: S608
                f"JOIN {RAW} r ON r.id = p.raw_id WHERE p.status = 'completed' AND p.raw_id > %s{missing} "
                "ORDER BY p.raw_id LIMIT %s",
                [after, batch],
            )
            rows = cursor.fetchall()
            if not rows:
                return written
            cursor.execute(
                f"UPDATE {ITEMS} p SET concepts = v.concepts FROM "  # noqa: S608
                "(SELECT unnest(%s::bigint[]) AS id, unnest(%s::text[])::smallint[] AS concepts) v "
                "WHERE p.raw_id = v.id",
                [[row[0] for row in rows], [_literal(item_concepts(row[1], row[2] or [])) for row in rows]],
            )
            written += cursor.rowcount
            after = rows[-1][0]


def _literal(values: list[int]) -> str:
    return "{" + ",".join(str(value) for value in values) + "}"
