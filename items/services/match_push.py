"""Match push (docs/feed.md#match-push): a newly completed item is pushed as `item.matched` to the online agents
whose profile it matches, each scored by the feed's own ranking; at most MATCH_PUSH_PER_HOUR per agent, never
twice for one (agent, item), never to its author or to an agent that turned `match_push` off.

Every decision is logged (docs/feed.md#seeing-a-match-push-happen): one INFO line per item naming the agents
pushed to and, by reason, those that were not; one DEBUG line per online agent with its score or cosine.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import timedelta

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone
from pgvector.django import CosineDistance

from eigenflux.base.embedding_space import configured_embedding_model
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
_IDS_PER_REASON = 10  # agent ids a summary line names per reason; the rest are counted

log = logging.getLogger(__name__)

# What was decided for an online agent near the item: pushed, or why not (the reasons the log lines name).
PUSHED = "pushed"
AUTHOR = "author"  # its own item
PROFILE_TOO_FAR = "profile_too_far"  # the profile's cosine with the item is at or below FEED_MATCH_FLOOR
INACTIVE = "inactive"  # the agent is deactivated
MATCH_PUSH_OFF = "match_push_off"  # the agent turned `match_push` off
NO_RELEVANCE = "no_relevance"  # the ranking's match and concepts parts are both zero: only quality, freshness...
BELOW_THRESHOLD = "below_threshold"  # the ranking score is below MATCH_PUSH_THRESHOLD
ALREADY_PUSHED = "already_pushed"  # this (agent, item) was pushed before (a redelivered or replayed event)
RATE_LIMITED = "rate_limited"  # the agent had its MATCH_PUSH_PER_HOUR pushes this hour


@dataclass(frozen=True)
class MatchTarget:
    agent_id: int
    score: float
    side: str


def pushable_item(item_id: int) -> tuple[ProcessedItem | None, str]:
    """The item a push may be about, or None and why not: visible in the feed (completed, not expired),
    completed recently (MATCH_PUSH_MAX_AGE_MINUTES, so a backlog or a new consumer group does not push old news),
    with an embedding and a broadcast type, and not below FEED_MIN_QUALITY (a vague post, which the feed ranks
    after everything else, is never worth interrupting anyone for)."""
    item: ProcessedItem | None = visible_items(None, None).filter(pk=item_id).first()
    if item is None:
        return None, "it is not in the feed (not completed, expired or deleted)"
    since = timezone.now() - timedelta(minutes=settings.MATCH_PUSH_MAX_AGE_MINUTES)
    if item.processed_at is None or item.processed_at < since:
        return None, f"it completed more than MATCH_PUSH_MAX_AGE_MINUTES ({settings.MATCH_PUSH_MAX_AGE_MINUTES:g}) ago"
    if item.embedding is None:
        return None, "it has no embedding"
    if item.broadcast_type not in SIDE_BY_TYPE:
        return None, f"its broadcast type {item.broadcast_type!r} is never pushed"
    if item.quality is not None and item.quality < settings.FEED_MIN_QUALITY:
        return None, f"its quality {item.quality:.2f} is below FEED_MIN_QUALITY ({settings.FEED_MIN_QUALITY:g})"
    return item, ""


@dataclass
class PushDecisions:
    """What was decided for each online agent near one item, logged as it is decided (DEBUG) and summed up in
    one line (INFO) when the push ends."""

    item: ProcessedItem
    by_reason: dict[str, list[int]] = field(default_factory=dict)
    offline: int = 0  # near profiles whose agents have no socket open

    def add(self, agent_id: int, reason: str, detail: str, score: float | None = None) -> None:
        self.by_reason.setdefault(reason, []).append(agent_id)
        log.debug(
            "match push of item %s to agent %s: %s (%s)",
            self.item.pk,
            agent_id,
            "pushed" if reason == PUSHED else f"not pushed, {reason}",
            detail,
            extra={"item_id": self.item.pk, "agent_id": agent_id, "match_push": reason, "score": score},
        )

    def summary(self) -> str:
        side = SIDE_BY_TYPE[self.item.broadcast_type]
        pushed = self.by_reason.get(PUSHED, [])
        parts = [f"pushed to {_ids(pushed)}" if pushed else "pushed to nobody"]
        refused = {reason: ids for reason, ids in self.by_reason.items() if reason != PUSHED}
        if refused:
            parts.append("not pushed: " + ", ".join(f"{reason} {_ids(ids)}" for reason, ids in refused.items()))
        if not self.by_reason:
            parts.append(f"no online agent has a `{side}` profile near it")
        parts.append(f"{self.offline} near profile(s) offline")
        return f"match push of item {self.item.pk} ({self.item.broadcast_type}, against readers' {side}): " + "; ".join(
            parts
        )

    def log(self) -> None:
        log.info(
            "%s",
            self.summary(),
            extra={"item_id": self.item.pk, "match_push": "decided", "match_push_decisions": self.by_reason},
        )


def _ids(ids: list[int]) -> str:
    shown = ", ".join(str(agent_id) for agent_id in ids[:_IDS_PER_REASON])
    more = f" and {len(ids) - _IDS_PER_REASON} more" if len(ids) > _IDS_PER_REASON else ""
    return f"agent(s) [{shown}]{more}"


def _log_no_push(item_id: int, why: str) -> None:
    log.info("match push of item %s: nobody, %s", item_id, why, extra={"item_id": item_id, "match_push": "none"})


def nearest_profiles(*, item: ProcessedItem) -> list[tuple[int, float]]:
    """(agent id, cosine) of the MATCH_PUSH_CANDIDATES reader profiles nearest to the item, on the side it is read
    against (seeks, or offers for a demand), nearest first. Only vectors of the configured embedding model are
    compared: an item or a profile of another (a re-embed under way) is nobody's match yet."""
    model = configured_embedding_model()
    if item.embedding_model != model:
        return []
    column = f"{SIDE_BY_TYPE[item.broadcast_type]}_embedding"
    limit = settings.MATCH_PUSH_CANDIDATES
    with transaction.atomic(), connection.cursor() as cursor:
        # The HNSW scan returns at most ef_search rows (40 by default): widen it to the limit, for this query only.
        cursor.execute("SET LOCAL hnsw.ef_search = %s", [max(40, min(limit, _HNSW_EF_SEARCH_MAX))])
        rows = list(
            ReaderProfile.objects.filter(**{f"{column}__isnull": False}, embedding_model=model)
            .annotate(distance=CosineDistance(column, item.embedding))
            .order_by("distance")
            .values_list("agent_id", "distance")[:limit]
        )
    return [(agent_id, 1.0 - distance) for agent_id, distance in rows]


def _near_online_readers(item: ProcessedItem, decisions: PushDecisions) -> list[Agent]:
    """The online agents whose profile is near the item and who may be pushed to (active, opted in, not its
    author); the others are recorded in `decisions` with their reason."""
    nearest = nearest_profiles(item=item)
    online = online_among(agent_id for agent_id, _ in nearest)
    decisions.offline = len(nearest) - len(online)
    floor, near = settings.FEED_MATCH_FLOOR, []
    for agent_id, cosine in nearest:
        if agent_id not in online:
            continue
        if agent_id == item.author_id:
            decisions.add(agent_id, AUTHOR, "its own item")
        elif cosine <= floor:
            decisions.add(agent_id, PROFILE_TOO_FAR, f"cosine {cosine:.3f} <= FEED_MATCH_FLOOR {floor:g}")
        else:
            near.append(agent_id)
    readers: list[Agent] = []
    for agent in Agent.objects.filter(pk__in=near).annotate(push_setting=F("client_settings__match_push")):
        if not agent.is_active:
            decisions.add(agent.pk, INACTIVE, "the agent is deactivated")
        elif agent.push_setting is False:
            decisions.add(agent.pk, MATCH_PUSH_OFF, "its settings say match_push: false")
        else:
            readers.append(agent)
    return readers


def match_targets(*, item: ProcessedItem, decisions: PushDecisions | None = None) -> list[MatchTarget]:
    """The online, active, opted-in candidates whose ranking score for the item reaches MATCH_PUSH_THRESHOLD with a
    positive relevance part, best first; why each other online agent near the item is not one goes to
    `decisions`."""
    decisions = decisions if decisions is not None else PushDecisions(item=item)
    side, threshold = SIDE_BY_TYPE[item.broadcast_type], settings.MATCH_PUSH_THRESHOLD
    targets = []
    for reader, ranked in scores_for_readers(readers=_near_online_readers(item, decisions), item=item):
        relevance = sum(ranked.parts.get(name, 0.0) for name in RELEVANCE_PARTS)
        parts = ", ".join(f"{name} {ranked.parts.get(name, 0.0):.2f}" for name in RELEVANCE_PARTS)
        if relevance <= 0:
            decisions.add(reader.pk, NO_RELEVANCE, f"score {ranked.score:.2f} but {parts}", ranked.score)
        elif ranked.score < threshold:
            detail = f"score {ranked.score:.2f} < MATCH_PUSH_THRESHOLD {threshold:g}; {parts}"
            decisions.add(reader.pk, BELOW_THRESHOLD, detail, ranked.score)
        else:
            targets.append(MatchTarget(agent_id=reader.pk, score=ranked.score, side=side))
    return sorted(targets, key=lambda target: (-target.score, target.agent_id))


def _sent_key(agent_id: int, item_id: int) -> str:
    return f"matchpush:{{{agent_id}}}:item:{item_id}"


def match_push_refusal(*, agent_id: int, item_id: int) -> str | None:
    """None when this (agent, item) may be pushed now, else why not: ALREADY_PUSHED unless this is the first
    claim of the pair (a Redis SET NX kept MATCH_PUSH_DEDUP_HOURS, so a redelivered event pushes nothing twice),
    then RATE_LIMITED unless the agent's hourly bucket has a token. RateLimitUnavailable or a RedisError when Redis
    cannot be asked (the caller retries later)."""
    ttl = int(settings.MATCH_PUSH_DEDUP_HOURS * 3600)
    if not get_redis().set(_sent_key(agent_id, item_id), "1", nx=True, ex=ttl):
        return ALREADY_PUSHED
    bucket = Limit(
        name="match_push",
        key=f"matchpush:{{{agent_id}}}:bucket",
        limit=settings.MATCH_PUSH_PER_HOUR,
        window_seconds=3600,
    )
    return None if buckets_hit([bucket], fail_open=False).allowed else RATE_LIMITED


def item_match_push(*, item_id: int, event_id: str, time: str) -> list[MatchTarget]:
    """Push `item.matched` for a newly completed item to every agent it matches; returns those pushed, and logs
    why the others were not (PushDecisions). Raises RateLimitUnavailable, a RedisError or OSError when Redis or
    the channel layer is away."""
    if settings.MATCH_PUSH_PER_HOUR <= 0:
        _log_no_push(item_id, "match push is off (MATCH_PUSH_PER_HOUR=0)")
        return []
    if not anyone_online():
        _log_no_push(item_id, "no agent has a WebSocket open")  # no read of the item, no search for candidates
        return []
    item, why_not = pushable_item(item_id)
    if item is None:
        _log_no_push(item_id, why_not)
        return []
    decisions = PushDecisions(item=item)
    pushed = []
    send = async_to_sync(get_channel_layer().group_send)
    for target in match_targets(item=item, decisions=decisions):
        score = f"score {target.score:.2f} >= MATCH_PUSH_THRESHOLD {settings.MATCH_PUSH_THRESHOLD:g}"
        refusal = match_push_refusal(agent_id=target.agent_id, item_id=item.pk)
        if refusal is not None:
            decisions.add(target.agent_id, refusal, score, target.score)
            continue
        message = matched_message(event_id=event_id, item_id=item.pk, score=target.score, side=target.side, time=time)
        try:
            send(agent_group(target.agent_id), message)
        except Exception:
            get_redis().delete(_sent_key(target.agent_id, item.pk))  # not sent: a retry may push it
            raise
        decisions.add(target.agent_id, PUSHED, score, target.score)
        pushed.append(target)
    decisions.log()
    return pushed


__all__ = [
    "MatchTarget",
    "PushDecisions",
    "RateLimitUnavailable",
    "item_match_push",
    "match_targets",
    "nearest_profiles",
]
