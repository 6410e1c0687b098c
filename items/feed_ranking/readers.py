"""Loads what the ranking knows of its readers (items.feed_ranking.signals.ReaderContext): their vectors, keywords
and concepts, their own judgments, and what similar readers liked. One reader (a feed) or many at once (a match
push scores one new item for up to MATCH_PUSH_CANDIDATES readers): the same few queries either way."""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from typing import Any

import redis
from django.conf import settings
from django.db import connection

from eigenflux.base.embedding_space import configured_embedding_model
from eigenflux.base.redis import get_redis, reply_text
from items.feed_ranking.candidates import vector_text
from items.feed_ranking.concepts import concepts
from items.feed_ranking.context import ITEMS, embedding_of, model_vector_sql
from items.feed_ranking.signals import ReaderContext, unit
from items.models import Agent, FeedEvent, ItemFeedback, ItemStatus, ReaderProfile

# A feed event is a positive judgment, weighted like the score it stands for (a task is as good as a +2).
EVENT_WEIGHTS = {"surface": 0.25, "question": 0.5, "discussion": 0.5, "task": 1.0}
SCORE_WEIGHTS = {-1: -1.0, 0: 0.0, 1: 0.5, 2: 1.0}
log = logging.getLogger(__name__)


def reader_context(reader: Agent) -> ReaderContext:
    (context,) = reader_contexts([reader])
    return context


def reader_contexts(readers: list[Agent], *, only_items: set[int] | None = None) -> list[ReaderContext]:
    """Each reader's context, in order: one query for the profiles, one for every reader's judgments, and what
    similar readers liked (one query per reader, kept in Redis). With `only_items` (the caller scores just these
    items), nobody's neighbours are read when none of them was scored +1/+2: the neighbours signal of an item
    nobody liked is 0 for every reader (a match push's new item)."""
    # A profile embedded by another model than the configured one (a re-embed not done yet) counts as none: its
    # vectors are not comparable with the items'.
    model = configured_embedding_model()
    profiles = {
        profile.agent_id: profile
        for profile in ReaderProfile.objects.filter(agent__in=readers)
        if profile.embedding_model == model
    }
    judged = _judged(readers)
    neighbours = only_items is None or ItemFeedback.objects.filter(item_id__in=only_items, score__gte=1).exists()
    contexts = []
    for reader in readers:
        profile = profiles.get(reader.pk)
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
            judged=judged.get(reader.pk, ([], {}))[0],
            type_judgments=judged.get(reader.pk, ([], {}))[1],
        )
        if neighbours and seeks is not None and profile is not None:
            context.neighbour_likes = _neighbour_likes_cached(reader, profile, seeks)
        contexts.append(context)
    return contexts


def _parts(whole, parts: list) -> list:
    vectors = [whole, *(unit(part) for part in parts)] if whole is not None else []
    return [vector for vector in vectors if vector is not None]


def _judged(readers: list[Agent]) -> dict[int, tuple[list[tuple], dict[str, tuple[float, float]]]]:
    """Each reader's latest scores and feed events (FEED_OWN_FEEDBACK_ITEMS of each), as (item embedding,
    weight), and the weight it gave each broadcast type (type_judgments): one query for all the readers (a lateral
    read of each one's latest by its index)."""
    limit = settings.FEED_OWN_FEEDBACK_ITEMS
    if limit <= 0 or not readers:
        return {}
    vector = model_vector_sql()  # a judged item of another model has no vector here
    sql = (
        "WITH r AS (SELECT unnest(%(readers)s::bigint[]) AS id), "  # noqa: S608
        "f AS (SELECT r.id AS reader, x.item_id, x.score FROM r CROSS JOIN LATERAL (SELECT item_id, score "
        f"FROM {ItemFeedback._meta.db_table} WHERE reader_id = r.id ORDER BY updated_at DESC LIMIT %(limit)s) x), "
        "e AS (SELECT r.id AS reader, x.item_id, x.kind FROM r CROSS JOIN LATERAL (SELECT item_id, kind "
        f"FROM {FeedEvent._meta.db_table} WHERE agent_id = r.id ORDER BY created_at DESC LIMIT %(limit)s) x) "
        f"SELECT f.reader, 0, f.item_id, f.score, NULL, p.broadcast_type, {vector} FROM f JOIN {ITEMS} p "
        f"ON p.raw_id = f.item_id UNION ALL SELECT e.reader, 1, e.item_id, NULL, e.kind, p.broadcast_type, {vector} "
        f"FROM e JOIN {ITEMS} p ON p.raw_id = e.item_id "
        # Events recorded before an item was held count only while the reader may see the item.
        f"AND (p.status = '{ItemStatus.COMPLETED.value}' OR p.author_id = e.reader)"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, {"readers": [reader.pk for reader in readers], "limit": limit})
        rows = cursor.fetchall()
    by_reader: dict[int, list[tuple]] = defaultdict(list)
    for row in rows:
        by_reader[row[0]].append(row[1:])
    return {reader: _weighed(reader_rows) for reader, reader_rows in by_reader.items()}


def _weighed(rows: list[tuple]) -> tuple[list[tuple], dict[str, tuple[float, float]]]:
    """One reader's judgments: a score's weight, or the strongest of its feed events on an item it did not score
    -1; those with no weight or no embedding left out. And what it gave each broadcast type, from the same weights."""
    weights: dict[int, float] = {}
    vectors: dict[int, object] = {}
    kinds: dict[int, str] = {}
    for source, item_id, score, kind, broadcast_type, embedding in sorted(rows, key=lambda row: row[0]):
        vectors[item_id], kinds[item_id] = embedding, broadcast_type  # scores first: a -1 is seen before events
        if source == 0:
            weights[item_id] = SCORE_WEIGHTS.get(score, 0.0)
        elif weights.get(item_id, 0.0) >= 0:  # a -1 outweighs having looked at it
            weights[item_id] = max(weights.get(item_id, 0.0), EVENT_WEIGHTS.get(kind, 0.0))
    judged = [(embedding_of(vectors[item_id]), weight) for item_id, weight in weights.items() if weight]
    by_type: dict[str, tuple[float, float]] = {}
    for item_id, weight in weights.items():
        up, down = by_type.get(kinds[item_id], (0.0, 0.0))
        by_type[kinds[item_id]] = (up + max(weight, 0.0), down + max(-weight, 0.0))
    return [(vector, weight) for vector, weight in judged if vector is not None], by_type


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


def _neighbour_likes(reader: Agent, seeks) -> dict[int, float]:
    """Items scored 1 or 2 by the readers whose seeks are nearest the reader's (HNSW on reader_seeks), summed
    over them by similarity: one query."""
    count = settings.FEED_NEIGHBOUR_READERS
    if count <= 0 or settings.FEED_CANDIDATES_NEIGHBOURS <= 0:
        return {}
    sql = (
        "WITH near AS (SELECT agent_id, 1 - (seeks_embedding <=> %(seeks)s::vector) AS similarity "  # noqa: S608
        f"FROM {ReaderProfile._meta.db_table} WHERE seeks_embedding IS NOT NULL AND agent_id <> %(reader)s "
        "AND embedding_model = %(model)s "
        "ORDER BY seeks_embedding <=> %(seeks)s::vector LIMIT %(count)s) "
        f"SELECT f.item_id, f.score, n.similarity FROM near n JOIN {ItemFeedback._meta.db_table} f "
        "ON f.reader_id = n.agent_id WHERE n.similarity > %(floor)s AND f.score >= 1 "
        "ORDER BY f.updated_at DESC LIMIT %(likes)s"
    )
    params: dict[str, Any] = {
        "seeks": vector_text(seeks),
        "reader": reader.pk,
        "model": configured_embedding_model(),
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
