"""Loads what the ranking knows (items.feed_ranking.signals): the reader's context and the candidates' facts."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime

import numpy as np
from django.conf import settings
from django.db.models import F, TextField
from django.db.models.functions import Cast
from pgvector.django import CosineDistance

from items.feed_ranking.concepts import concepts
from items.feed_ranking.signals import ItemFacts, ReaderContext, unit
from items.models import Agent, FeedEvent, ItemFeedback, ProcessedItem, ReaderProfile

# A feed event is a positive judgment, weighted like the score it stands for (a task is as good as a +2).
EVENT_WEIGHTS = {"surface": 0.25, "question": 0.5, "discussion": 0.5, "task": 1.0}
SCORE_WEIGHTS = {-1: -1.0, 0: 0.0, 1: 0.5, 2: 1.0}


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
    if context.seeks is not None:
        context.neighbour_likes = _neighbour_likes(reader, context.seeks)
    return context


def _parts(whole, parts: list) -> list:
    vectors = [whole, *(unit(part) for part in parts)] if whole is not None else []
    return [vector for vector in vectors if vector is not None]


def _judged(reader: Agent) -> list[tuple]:
    """The reader's latest scores and feed events, as (item embedding, weight)."""
    limit = settings.FEED_OWN_FEEDBACK_ITEMS
    if limit <= 0:
        return []
    weights: dict[int, float] = {}
    scored = ItemFeedback.objects.filter(reader=reader).order_by("-updated_at").values_list("item_id", "score")
    for item_id, score in scored[:limit]:
        weights[item_id] = SCORE_WEIGHTS.get(score, 0.0)
    events = FeedEvent.objects.filter(agent=reader).order_by("-created_at").values_list("item_id", "kind")
    for item_id, kind in events[:limit]:
        if weights.get(item_id, 0.0) >= 0:  # a -1 outweighs having looked at it
            weights[item_id] = max(weights.get(item_id, 0.0), EVENT_WEIGHTS.get(kind, 0.0))
    weights = {item_id: weight for item_id, weight in weights.items() if weight}
    rows = ProcessedItem.objects.filter(pk__in=weights, embedding__isnull=False).values_list("pk", "embedding")
    return [(vector, weights[pk]) for pk, embedding in rows if (vector := unit(embedding)) is not None]


def _neighbour_likes(reader: Agent, seeks) -> dict[int, float]:
    """Items scored 1 or 2 by the readers whose seeks are nearest the reader's (HNSW on reader_seeks), summed
    over them by similarity."""
    count = settings.FEED_NEIGHBOUR_READERS
    if count <= 0 or settings.FEED_CANDIDATES_NEIGHBOURS <= 0:
        return {}
    nearest = (
        ReaderProfile.objects.filter(seeks_embedding__isnull=False)
        .exclude(agent=reader)
        .annotate(distance=CosineDistance("seeks_embedding", seeks.tolist()))
        .order_by("distance")
        .values_list("agent_id", "distance")[:count]
    )
    similarity = {agent_id: 1.0 - float(distance) for agent_id, distance in nearest}
    similarity = {agent_id: value for agent_id, value in similarity.items() if value > settings.FEED_MATCH_FLOOR}
    likes: dict[int, float] = defaultdict(float)
    liked = (
        ItemFeedback.objects.filter(reader_id__in=similarity, score__gte=1)
        .order_by("-updated_at")
        .values_list("reader_id", "item_id", "score")
    )
    for reader_id, item_id, score in liked[: settings.FEED_CANDIDATES_NEIGHBOURS * 5]:
        likes[item_id] += similarity[reader_id] * SCORE_WEIGHTS[score]
    return dict(likes)


def item_facts(ids: list[int], *, now: datetime) -> dict[int, ItemFacts]:
    rows = ProcessedItem.objects.filter(pk__in=ids).values_list(
        "pk",
        "author_id",
        "broadcast_type",
        "keywords",
        "domains",
        "quality",
        "processed_at",
        "created_at",
        Cast("embedding", output_field=TextField()),  # parsed below in C (np.fromstring), not value by value
        "raw__content",
        F("author__is_official"),
        F("stats__readers"),
        F("stats__score_sum"),
        F("stats__consumed"),
        F("stats__score_one"),
        F("stats__score_two"),
        F("stats__score_minus_one"),
        F("stats__updated_at"),
    )
    facts = {}
    for row in rows:
        (pk, author, kind, keywords, domains, quality, processed, created, embedding, content, official) = row[:11]
        readers, score_sum, consumed, ones, twos, minus, stats_at = row[11:]
        engagement = (ones or 0) + 2 * (twos or 0) - (minus or 0)
        engagement += settings.FEED_TRENDING_CONSUMED_WEIGHT * (consumed or 0)
        facts[pk] = ItemFacts(
            item_id=pk,
            author_id=author,
            broadcast_type=kind,
            keywords=tuple(keywords),
            domains=tuple(domains),
            quality=quality,
            completed_at=processed or created,
            embedding=unit(np.fromstring(embedding[1:-1], dtype=np.float32, sep=",")) if embedding else None,
            concepts=concepts(" ".join([content, *keywords])),
            author_official=bool(official),
            readers=readers or 0,
            score_sum=score_sum or 0,
            consumed=consumed or 0,
            engagement=max(0.0, engagement),
            stats_updated_at=stats_at,
        )
    return facts
