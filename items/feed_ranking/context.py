"""Loads what the ranking knows (items.feed_ranking.signals): the reader's context and the candidates' facts."""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from datetime import UTC, datetime
from typing import Any

import numpy as np
import redis
from django.conf import settings
from django.db import connection, transaction

from eigenflux.base.redis import get_redis, reply_text
from items.feed_ranking.candidates import VISIBLE_SQL, candidate_sources, hnsw_ef_search, type_and_domain, vector_text
from items.feed_ranking.concepts import concepts, item_concepts
from items.feed_ranking.signals import ItemFacts, ReaderContext, unit
from items.models import (
    Agent,
    FeedDelivery,
    FeedEvent,
    ItemFeedback,
    ItemStats,
    ProcessedItem,
    RawItem,
    ReaderProfile,
)

# A feed event is a positive judgment, weighted like the score it stands for (a task is as good as a +2).
EVENT_WEIGHTS = {"surface": 0.25, "question": 0.5, "discussion": 0.5, "task": 1.0}
SCORE_WEIGHTS = {-1: -1.0, 0: 0.0, 1: 0.5, 2: 1.0}
ITEMS = ProcessedItem._meta.db_table
log = logging.getLogger(__name__)


def reader_context(reader: Agent) -> ReaderContext:
    profile = ReaderProfile.objects.filter(agent=reader).first()
    seeks = unit(profile.seeks_embedding) if profile else None
    offers = unit(profile.offers_embedding) if profile else None
    context = ReaderContext(
        agent_id=reader.pk,
        seeks=seeks,
        offers=offers,
        seeks_parts=_parts(seeks, profile.seeks_parts if profile else []),
        offers_parts=_parts(offers, profile.offers_parts if profile else []),
        keywords=frozenset(keyword.casefold() for keyword in reader.profile_keywords),
        seeks_concepts=concepts(reader.seeks or reader.bio),
        offers_concepts=concepts(reader.offers),
    )
    context.judged = _judged(reader)
    if context.seeks is not None and profile is not None:
        context.neighbour_likes = _neighbour_likes_cached(reader, profile, context.seeks)
    return context


def _neighbour_likes_cached(reader: Agent, profile: ReaderProfile, seeks) -> dict[int, float]:
    """_neighbour_likes, kept in Redis for FEED_NEIGHBOURS_CACHE_SECONDS per profile version: what similar
    readers liked moves slowly, and a changed profile (new vectors) is a new key. The reader's own judgments are
    read afresh every time (_judged). Without Redis, computed each time."""
    ttl = settings.FEED_NEIGHBOURS_CACHE_SECONDS
    if ttl <= 0:
        return _neighbour_likes(reader, seeks)
    key = f"feed:neighbours:{reader.pk}:{profile.version.timestamp():.6f}"
    try:
        cached = get_redis().get(key)
    except redis.RedisError as exc:
        log.warning("neighbour cache unavailable (%s)", exc.__class__.__name__)
        return _neighbour_likes(reader, seeks)
    if cached is not None:
        return {int(item_id): weight for item_id, weight in json.loads(reply_text(cached)).items()}
    likes = _neighbour_likes(reader, seeks)
    try:
        get_redis().set(key, json.dumps(likes), ex=ttl)
    except redis.RedisError as exc:
        log.warning("neighbour cache unavailable (%s)", exc.__class__.__name__)
    return likes


def _parts(whole, parts: list) -> list:
    vectors = [whole, *(unit(part) for part in parts)] if whole is not None else []
    return [vector for vector in vectors if vector is not None]


def _judged(reader: Agent) -> list[tuple]:
    """The reader's latest scores and feed events, as (item embedding, weight): one query."""
    limit = settings.FEED_OWN_FEEDBACK_ITEMS
    if limit <= 0:
        return []
    sql = (
        f"WITH f AS (SELECT item_id, score FROM {ItemFeedback._meta.db_table} WHERE reader_id = %(reader)s "  # noqa: S608
        "ORDER BY updated_at DESC LIMIT %(limit)s), "
        f"e AS (SELECT item_id, kind FROM {FeedEvent._meta.db_table} WHERE agent_id = %(reader)s "
        "ORDER BY created_at DESC LIMIT %(limit)s) "
        f"SELECT 0, f.item_id, f.score, NULL, vector_send(p.embedding) FROM f JOIN {ITEMS} p ON p.raw_id = f.item_id "
        f"UNION ALL SELECT 1, e.item_id, NULL, e.kind, vector_send(p.embedding) FROM e JOIN {ITEMS} p "
        "ON p.raw_id = e.item_id"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, {"reader": reader.pk, "limit": limit})
        rows = sorted(cursor.fetchall(), key=lambda row: row[0])  # scores first: a -1 outweighs an event
    weights: dict[int, float] = {}
    vectors: dict[int, object] = {}
    for source, item_id, score, kind, embedding in rows:
        vectors[item_id] = embedding
        if source == 0:
            weights[item_id] = SCORE_WEIGHTS.get(score, 0.0)
        elif weights.get(item_id, 0.0) >= 0:  # a -1 outweighs having looked at it
            weights[item_id] = max(weights.get(item_id, 0.0), EVENT_WEIGHTS.get(kind, 0.0))
    judged = [(_embedding(vectors[item_id]), weight) for item_id, weight in weights.items() if weight]
    return [(vector, weight) for vector, weight in judged if vector is not None]


def _neighbour_likes(reader: Agent, seeks) -> dict[int, float]:
    """Items scored 1 or 2 by the readers whose seeks are nearest the reader's (HNSW on reader_seeks), summed
    over them by similarity: one query."""
    count = settings.FEED_NEIGHBOUR_READERS
    if count <= 0 or settings.FEED_CANDIDATES_NEIGHBOURS <= 0:
        return {}
    sql = (
        "WITH near AS (SELECT agent_id, 1 - (seeks_embedding <=> %(seeks)s::vector) AS similarity "  # noqa: S608
        f"FROM {ReaderProfile._meta.db_table} WHERE seeks_embedding IS NOT NULL AND agent_id <> %(reader)s "
        "ORDER BY seeks_embedding <=> %(seeks)s::vector LIMIT %(count)s) "
        f"SELECT f.item_id, f.score, n.similarity FROM near n JOIN {ItemFeedback._meta.db_table} f "
        "ON f.reader_id = n.agent_id WHERE n.similarity > %(floor)s AND f.score >= 1 "
        "ORDER BY f.updated_at DESC LIMIT %(likes)s"
    )
    params: dict[str, Any] = {
        "seeks": vector_text(seeks),
        "reader": reader.pk,
        "count": count,
        "floor": settings.FEED_MATCH_FLOOR,
        "likes": settings.FEED_CANDIDATES_NEIGHBOURS * 5,
    }
    likes: dict[int, float] = defaultdict(float)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        for item_id, score, similarity in cursor.fetchall():
            likes[item_id] += float(similarity) * SCORE_WEIGHTS[score]
    return dict(likes)


# One row per item: what ItemFacts holds. The embedding comes as pgvector's binary form (vector_send: a 4-byte
# header, then big-endian float4s), read with np.frombuffer: no float-to-text and back for 384 numbers a row.
# Moments come as seconds since the epoch (a float is read natively; a timestamp goes through Django's loader,
# several microseconds each, two per candidate). The concepts come stored (ProcessedItem.concepts); an item
# stored without them has its text read (_concepts).
FACTS_SQL = (
    "SELECT p.raw_id, p.author_id, p.broadcast_type, p.keywords, p.domains, p.quality, "  # noqa: S608
    "extract(epoch FROM COALESCE(p.processed_at, p.created_at))::float8, vector_send(p.embedding), p.concepts, "
    "a.is_official, s.readers, s.score_sum, s.consumed, s.score_one, s.score_two, s.score_minus_one, "
    "extract(epoch FROM s.updated_at)::float8 "
    f"FROM {ITEMS} p JOIN {Agent._meta.db_table} a ON a.id = p.author_id "
    f"LEFT JOIN {ItemStats._meta.db_table} s ON s.item_id = p.raw_id"
)


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
            "AND d.group_id = n.g AND d.delivered_at >= %(seen)s)"
        )
        params["seen"] = seen_since
    sql = (
        f"WITH found AS ({sources}), keys AS (SELECT DISTINCT p.g FROM found p WHERE {where}), "  # noqa: S608
        "newest AS (SELECT g, max(id) AS id FROM ("
        f"SELECT p.group_id AS g, p.raw_id AS id FROM {ITEMS} p JOIN keys k ON p.group_id = k.g WHERE {where} "
        f"UNION ALL SELECT p.raw_id, p.raw_id FROM {ITEMS} p JOIN keys k ON p.raw_id = k.g "
        f"WHERE p.group_id IS NULL AND {where}) m GROUP BY g) "
        f"{FACTS_SQL} JOIN newest n ON n.id = p.raw_id {unseen} ORDER BY p.raw_id DESC"
    )
    with transaction.atomic(), connection.cursor() as cursor:
        hnsw_ef_search(cursor)
        cursor.execute(sql, params)
        return _all_facts(cursor.fetchall())


def item_facts(ids: list[int], *, now: datetime) -> dict[int, ItemFacts]:
    """The facts of these items, whatever their status (the admin's and a match push's single item)."""
    del now  # the facts do not depend on it; kept for callers
    with connection.cursor() as cursor:
        cursor.execute(f"{FACTS_SQL} WHERE p.raw_id = ANY(%s)", [list(ids)])
        return {facts.item_id: facts for facts in _all_facts(cursor.fetchall())}


def _embedding(data) -> np.ndarray | None:
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
