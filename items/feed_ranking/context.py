"""Loads what the ranking knows of items (items.feed_ranking.signals): the candidates' facts (the reader's side is
items.feed_ranking.readers)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

import numpy as np
from django.conf import settings
from django.db import connection, transaction

from eigenflux.base.embedding_space import configured_embedding_model_sql
from items.feed_ranking.candidates import VISIBLE_SQL, candidate_sources, hnsw_ef_search, type_and_domain
from items.feed_ranking.concepts import item_concepts
from items.feed_ranking.signals import ItemFacts, ReaderContext, unit
from items.models import (
    Agent,
    FeedDelivery,
    ItemStats,
    ProcessedItem,
    RawItem,
)

ITEMS = ProcessedItem._meta.db_table
log = logging.getLogger(__name__)


# One row per item: what ItemFacts holds. The embedding comes as pgvector's binary form (vector_send: a 4-byte
# header, then big-endian float4s), read with np.frombuffer: no float-to-text and back for 384 numbers a row.
# Moments come as seconds since the epoch (a float is read natively; a timestamp goes through Django's loader,
# several microseconds each, two per candidate). The concepts come stored (ProcessedItem.concepts); an item
# stored without them has its text read (_concepts).
def facts_sql(source: str) -> str:
    """SELECT the facts of each row of `source` (aliased p: the items table, or rows with its columns)."""
    return (
        "SELECT p.raw_id, p.author_id, p.broadcast_type, p.keywords, p.domains, p.quality, "  # noqa: S608
        f"extract(epoch FROM COALESCE(p.processed_at, p.created_at))::float8, {model_vector_sql()}, p.concepts, "
        # The author's flag by its primary key per row: a join let the planner hash the whole agents table
        # (a sequential scan growing with the network) for a few hundred rows.
        f"(SELECT a.is_official FROM {Agent._meta.db_table} a WHERE a.id = p.author_id), "
        "s.readers, s.score_sum, s.consumed, s.score_one, s.score_two, s.score_minus_one, "
        f"extract(epoch FROM s.updated_at)::float8 FROM {source} "
        f"LEFT JOIN {ItemStats._meta.db_table} s ON s.item_id = p.raw_id"
    )


# The item columns facts_sql reads.
FACT_COLUMNS = "p.raw_id, p.author_id, p.broadcast_type, p.keywords, p.domains, p.quality, p.processed_at, "
FACT_COLUMNS += "p.created_at, p.embedding, p.embedding_model, p.concepts"


def model_vector_sql() -> str:
    """An item's embedding (`p`) in vector_send's binary form when the configured model made it, else NULL: a
    vector of another model is not comparable with the reader's, so it ranks as an item without one."""
    return f"vector_send(CASE WHEN p.embedding_model = {configured_embedding_model_sql()} THEN p.embedding END)"


def servable_facts(
    reader: Agent,
    context: ReaderContext,
    *,
    broadcast_type: str | None,
    domain: str | None,
    seen_since: datetime | None,
    now: datetime,
) -> list[ItemFacts]:
    """The reader's candidates (candidates.candidate_sources), each one's group stood for by its newest visible
    member not written by the reader, leaving out the groups served to the reader since `seen_since` (the unseen
    feed's seen memory; None: no memory), with the facts of each, newest first. One statement: the sources, the
    groups of what they found, their members by the group index, the reader's deliveries by theirs."""
    params: dict[str, Any] = {"now": now, "reader": reader.pk, "kind": broadcast_type, "domain": domain}
    sources = candidate_sources(context, broadcast_type=broadcast_type, domain=domain, now=now, params=params)
    where = f"{VISIBLE_SQL} AND p.author_id <> %(reader)s{type_and_domain(broadcast_type, domain)}"
    unseen = ""
    if seen_since is not None:
        unseen = (
            f"WHERE NOT EXISTS (SELECT 1 FROM {FeedDelivery._meta.db_table} d WHERE d.agent_id = %(reader)s "  # noqa: S608
            "AND d.group_id = p.g AND d.delivered_at >= %(seen)s)"
        )
        params["seen"] = seen_since
    sql = (
        f"WITH found AS ({sources}), keys AS (SELECT DISTINCT p.g FROM found p WHERE {where}), "  # noqa: S608
        # Each group's newest member with the columns of its facts, read from the row the group index found.
        "newest AS (SELECT DISTINCT ON (m.g) m.* FROM ("
        f"SELECT p.group_id AS g, {FACT_COLUMNS} FROM {ITEMS} p JOIN keys k ON p.group_id = k.g WHERE {where} "
        f"UNION ALL SELECT p.raw_id, {FACT_COLUMNS} FROM {ITEMS} p JOIN keys k ON p.raw_id = k.g "
        f"WHERE p.group_id IS NULL AND {where}) m ORDER BY m.g, m.raw_id DESC) "
        f"{facts_sql('newest p')} {unseen} ORDER BY p.raw_id DESC"
    )
    with transaction.atomic(), connection.cursor() as cursor:
        hnsw_ef_search(cursor)
        cursor.execute(sql, params)
        return _all_facts(cursor.fetchall())


def item_facts(ids: list[int]) -> dict[int, ItemFacts]:
    """The facts of these items, whatever their status (the admin's and a match push's single item)."""
    with connection.cursor() as cursor:
        cursor.execute(f"{facts_sql(f'{ITEMS} p')} WHERE p.raw_id = ANY(%s)", [list(ids)])
        return {facts.item_id: facts for facts in _all_facts(cursor.fetchall())}


def embedding_of(data) -> np.ndarray | None:
    """A unit vector from pgvector's binary form (vector_send), or None."""
    if data is None:
        return None
    return unit(np.frombuffer(bytes(data), dtype=">f4", offset=4))


def _all_facts(rows: list[tuple]) -> list[ItemFacts]:
    """The facts of each row, embeddings read and normalised as one matrix."""
    embedded = [index for index, row in enumerate(rows) if row[7] is not None]
    vectors: list[np.ndarray | None] = [None] * len(rows)
    if embedded:
        matrix = np.stack([np.frombuffer(bytes(rows[index][7]), dtype=">f4", offset=4) for index in embedded])
        matrix = matrix.astype(np.float32)
        norms = np.linalg.norm(matrix, axis=1)
        keep = norms > 0
        matrix[keep] /= norms[keep, None]
        for index, vector, kept in zip(embedded, matrix, keep.tolist(), strict=True):
            if kept:
                vectors[index] = vector
    found = _concepts([row for row in rows if row[8] is None])
    consumed_weight = settings.FEED_TRENDING_CONSUMED_WEIGHT
    return [_facts(row, vectors[n], found, consumed_weight) for n, row in enumerate(rows)]


def _concepts(rows: list[tuple]) -> dict[int, frozenset[int]]:
    """The concepts of items stored without them (completed before the column, or written by hand): read from
    their text, as items.services.item_concepts stores them."""
    if not rows:
        return {}
    with connection.cursor() as cursor:
        sql = f"SELECT id, content FROM {RawItem._meta.db_table} WHERE id = ANY(%s)"  # noqa: S608
        cursor.execute(sql, [[row[0] for row in rows]])
        contents = dict(cursor.fetchall())
    return {row[0]: frozenset(item_concepts(contents.get(row[0], ""), row[3])) for row in rows}


def _facts(
    row: tuple, embedding: np.ndarray | None, found: dict[int, frozenset[int]], consumed_weight: float
) -> ItemFacts:
    (pk, author, kind, keywords, domains, quality, completed, _, stored, official) = row[:10]
    readers, score_sum, consumed, ones, twos, minus, stats_at = row[10:]
    engagement = (ones or 0) + 2 * (twos or 0) - (minus or 0)
    engagement += consumed_weight * (consumed or 0)
    return ItemFacts(
        item_id=pk,
        author_id=author,
        broadcast_type=kind,
        keywords=tuple(keywords),
        domains=tuple(domains),
        quality=quality,
        completed_at=datetime.fromtimestamp(completed, UTC),
        embedding=embedding,
        concepts=found[pk] if stored is None else frozenset(stored),
        author_official=bool(official),
        readers=readers or 0,
        score_sum=score_sum or 0,
        consumed=consumed or 0,
        engagement=max(0.0, engagement),
        stats_updated_at=None if stats_at is None else datetime.fromtimestamp(stats_at, UTC),
    )
