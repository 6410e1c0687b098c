"""Match push (docs/feed.md#match-push): a newly completed item is pushed as `item.matched` to the online agents
whose profile it matches, each scored by the feed's own ranking; at most MATCH_PUSH_PER_HOUR per agent, never
twice for one (agent, item), never to its author or to an agent that turned `match_push` off."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone
from pgvector.django import CosineDistance

from eigenflux.base.redis import get_redis
from items.events_socket import agent_group, matched_message
from items.feed_ranking import scores_for_readers
from items.models import Agent, ProcessedItem, ReaderProfile
from items.presence import anyone_online, online_among
from items.ratelimit import Limit, RateLimitUnavailable, buckets_hit
from items.selectors import visible_items

# The profile side a new item is read against (as the ranking's match signal reads it first): what is offered
# or told against what readers seek, a demand against what they offer.
SIDE_BY_TYPE = {"supply": "seeks", "info": "seeks", "alert": "seeks", "demand": "offers"}
# The parts of the ranking's score that say the item is about what the reader wants: a push needs one.
RELEVANCE_PARTS = ("match", "concepts")
_HNSW_EF_SEARCH_MAX = 1000  # pgvector's upper bound for hnsw.ef_search


@dataclass(frozen=True)
class MatchTarget:
    agent_id: int
    score: float
    side: str


def pushable_item(item_id: int) -> ProcessedItem | None:
    """The item a push may be about: visible in the feed (completed, not expired), completed recently
    (MATCH_PUSH_MAX_AGE_MINUTES, so a backlog or a new consumer group does not push old news), with an embedding
    and a broadcast type, and not below FEED_MIN_QUALITY (a vague post, which the feed ranks after everything
    else, is never worth interrupting anyone for)."""
    since = timezone.now() - timedelta(minutes=settings.MATCH_PUSH_MAX_AGE_MINUTES)
    item: ProcessedItem | None = visible_items(None, None).filter(pk=item_id, processed_at__gte=since).first()
    if item is None or item.embedding is None or item.broadcast_type not in SIDE_BY_TYPE:
        return None
    if item.quality is not None and item.quality < settings.FEED_MIN_QUALITY:
        return None
    return item


def match_candidates(*, item: ProcessedItem) -> list[int]:
    """The agents whose seeks (or offers, for a demand) are nearest to the item: at most MATCH_PUSH_CANDIDATES,
    above the embedding's noise floor (FEED_MATCH_FLOOR), never the author."""
    column = f"{SIDE_BY_TYPE[item.broadcast_type]}_embedding"
    limit = settings.MATCH_PUSH_CANDIDATES
    with transaction.atomic(), connection.cursor() as cursor:
        # The HNSW scan returns at most ef_search rows (40 by default): widen it to the limit, for this query only.
        cursor.execute("SET LOCAL hnsw.ef_search = %s", [max(40, min(limit, _HNSW_EF_SEARCH_MAX))])
        rows = list(
            ReaderProfile.objects.filter(**{f"{column}__isnull": False})
            .annotate(distance=CosineDistance(column, item.embedding))
            .order_by("distance")
            .values_list("agent_id", "distance")[:limit]
        )
    floor = settings.FEED_MATCH_FLOOR
    return [agent_id for agent_id, distance in rows if agent_id != item.author_id and 1.0 - distance > floor]


def match_targets(*, item: ProcessedItem) -> list[MatchTarget]:
    """The online, active, opted-in candidates whose ranking score for the item reaches MATCH_PUSH_THRESHOLD with a
    positive relevance part, best first."""
    online = online_among(match_candidates(item=item))
    readers = (
        Agent.objects.filter(pk__in=online, is_active=True)
        .exclude(pk=item.author_id)
        .exclude(client_settings__match_push=False)
    )
    side = SIDE_BY_TYPE[item.broadcast_type]
    targets = []
    for reader, ranked in scores_for_readers(readers=readers, item=item):
        relevance = sum(ranked.parts.get(name, 0.0) for name in RELEVANCE_PARTS)
        if relevance > 0 and ranked.score >= settings.MATCH_PUSH_THRESHOLD:
            targets.append(MatchTarget(agent_id=reader.pk, score=ranked.score, side=side))
    return sorted(targets, key=lambda target: (-target.score, target.agent_id))


def _sent_key(agent_id: int, item_id: int) -> str:
    return f"matchpush:{{{agent_id}}}:item:{item_id}"


def match_push_claim(*, agent_id: int, item_id: int) -> bool:
    """Whether this (agent, item) may be pushed now: the first claim of the pair (a Redis SET NX kept
    MATCH_PUSH_DEDUP_HOURS, so a redelivered event pushes nothing twice), then one token of the agent's hourly
    bucket. RateLimitUnavailable or a RedisError when Redis cannot be asked (the caller retries later)."""
    ttl = int(settings.MATCH_PUSH_DEDUP_HOURS * 3600)
    if not get_redis().set(_sent_key(agent_id, item_id), "1", nx=True, ex=ttl):
        return False
    bucket = Limit(
        name="match_push",
        key=f"matchpush:{{{agent_id}}}:bucket",
        limit=settings.MATCH_PUSH_PER_HOUR,
        window_seconds=3600,
    )
    return buckets_hit([bucket], fail_open=False).allowed


def item_match_push(*, item_id: int, event_id: str, time: str) -> list[MatchTarget]:
    """Push `item.matched` for a newly completed item to every agent it matches; returns those pushed. Raises
    RateLimitUnavailable, a RedisError or OSError when Redis or the channel layer is away."""
    if settings.MATCH_PUSH_PER_HOUR <= 0 or not anyone_online():
        return []  # nobody to push to: no read of the item, no search for candidates
    item = pushable_item(item_id)
    if item is None:
        return []
    pushed = []
    send = async_to_sync(get_channel_layer().group_send)
    for target in match_targets(item=item):
        if not match_push_claim(agent_id=target.agent_id, item_id=item.pk):
            continue
        message = matched_message(event_id=event_id, item_id=item.pk, score=target.score, side=target.side, time=time)
        try:
            send(agent_group(target.agent_id), message)
        except Exception:
            get_redis().delete(_sent_key(target.agent_id, item.pk))  # not sent: a retry may push it
            raise
        pushed.append(target)
    return pushed


__all__ = ["MatchTarget", "RateLimitUnavailable", "item_match_push", "match_candidates", "match_targets"]
