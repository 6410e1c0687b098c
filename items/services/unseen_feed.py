"""The unseen feed: a feed with seen memory, as the original EigenFlux network serves it.

A *refresh* ranks the reader's candidates afresh (items.feed_ranking: visible, not its own, one per similarity
group, no group it was served within FEED_SEEN_DAYS), serves the first `limit` and keeps the rest of the ranking (up to
10 x limit, at most FEED_RANK_DEPTH) as the reader's delivery cache: a server-side cursor in Redis that *load_more*
drains, under the same impression id, for FEED_DELIVERY_CACHE_SECONDS. A load_more on an empty, expired or
replaced cache is a refresh. Every served item is recorded (FeedDelivery, in PostgreSQL, so the memory is
shared by every web process and outlives the feed's page cache) and announced on stream:item:stats, where
the stats consumer counts it as a consumption for the author.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from datetime import timedelta

import redis
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from eigenflux.base.redis import get_redis, reply_text
from items import selectors
from items.events import ITEM_DELIVERED, STREAM_ITEM_STATS
from items.feed_ranking import RankedItem, rank_entries, ranked_items
from items.models import Agent, FeedDelivery, ProcessedItem
from items.outbox import outbox_event_create

log = logging.getLogger(__name__)

CACHE_FACTOR = 10
CACHE_MAX = 500


@dataclass(frozen=True)
class Delivery:
    items: list[ProcessedItem]
    impression_id: str
    has_more: bool
    refreshed: bool  # False only for a load_more served from the delivery cache
    # A ranked refresh's page with its scores and ranker features (the impression log's); None for a load_more
    # page (from the cache: ids only) and an unranked one.
    ranked: list[RankedItem] | None = None


def _keys(reader: Agent) -> tuple[str, str]:
    # One hash tag per reader, so both keys live on one Redis Cluster slot (they change together).
    tag = f"feed:delivery:{{{reader.pk}}}"
    return f"{tag}:queue", f"{tag}:impression"


def feed_refresh(
    *,
    reader: Agent,
    limit: int,
    broadcast_type: str | None = None,
    domain: str | None = None,
    personalised: bool = True,
) -> Delivery:
    seen_since = timezone.now() - timedelta(days=settings.FEED_SEEN_DAYS)
    window = limit + min(CACHE_FACTOR * limit, CACHE_MAX)
    if personalised:
        entries = rank_entries(
            reader=reader,
            page_size=limit,
            depth=min(window, settings.FEED_RANK_DEPTH),
            broadcast_type=broadcast_type,
            domain=domain,
            seen_since=seen_since,
        )
        # Only the page served is loaded as items; the rest of the ranking goes to the cache as ids.
        page = ranked_items(entries[:limit])
        ranked: list[RankedItem] | None = page
        served = [entry.item for entry in page]
        rest = [entry.facts.item_id for entry in entries[limit:]]
    else:
        candidates = selectors.unseen_feed_candidates(
            reader=reader, broadcast_type=broadcast_type, domain=domain, seen_since=seen_since, limit=window
        )
        served, rest, ranked = candidates[:limit], [item.pk for item in candidates[limit:]], None
    impression_id = f"imp_{uuid.uuid4().hex}"
    _record(reader=reader, items=served, impression_id=impression_id)
    cached = _cache_replace(reader=reader, impression_id=impression_id, ids=rest)
    return Delivery(items=served, impression_id=impression_id, has_more=cached, refreshed=True, ranked=ranked)


def feed_load_more(
    *,
    reader: Agent,
    limit: int,
    impression_id: str | None = None,
    broadcast_type: str | None = None,
    domain: str | None = None,
    personalised: bool = True,
) -> Delivery:
    """The next `limit` entries of the reader's delivery cache (of `impression_id`, when given). Entries that
    stopped being visible meanwhile (deleted, taken down, expired) are skipped."""
    queue_key, impression_key = _keys(reader)
    served: list[ProcessedItem] = []
    current = None
    remaining = 0
    try:
        client = get_redis()
        cached = client.get(impression_key)
        current = reply_text(cached) if cached is not None else None
        if current is not None and impression_id in (None, current):
            while len(served) < limit:
                with client.pipeline(transaction=True) as pipe:
                    pipe.lpop(queue_key, limit - len(served))
                    pipe.llen(queue_key)
                    popped, remaining = pipe.execute()
                if not popped:
                    break
                served += selectors.feed_items_by_ids(reader=reader, ids=[int(pk) for pk in popped])
    except redis.RedisError as exc:
        log.warning("delivery cache unavailable (%s); load_more serves a refresh", exc.__class__.__name__)
        current = None
    if current is None or impression_id not in (None, current) or (not served and not remaining):
        return feed_refresh(
            reader=reader, limit=limit, broadcast_type=broadcast_type, domain=domain, personalised=personalised
        )
    _record(reader=reader, items=served, impression_id=current)
    return Delivery(items=served, impression_id=current, has_more=remaining > 0, refreshed=False)


def _record(*, reader: Agent, items: list[ProcessedItem], impression_id: str) -> None:
    """Remember what was served (seen memory) and announce it for the authors' consumption counters."""
    if not items:
        return
    now = timezone.now()
    with transaction.atomic():
        FeedDelivery.objects.bulk_create(
            [
                FeedDelivery(
                    agent=reader,
                    item=item,
                    group_id=item.group_id or item.pk,
                    impression_id=impression_id,
                    delivered_at=now,
                )
                for item in items
            ],
            update_conflicts=True,
            unique_fields=["agent", "item"],
            update_fields=["group_id", "impression_id", "delivered_at"],
        )
        outbox_event_create(
            stream=STREAM_ITEM_STATS,
            event_type=ITEM_DELIVERED,
            subject=str(reader.pk),
            data={
                "reader_id": str(reader.pk),
                "impression_id": impression_id,
                "item_ids": [str(item.pk) for item in items],
            },
        )


def _cache_replace(*, reader: Agent, impression_id: str, ids: list[int]) -> bool:
    """Replace the reader's delivery cache; True if it holds entries. Without Redis there is no cache (a
    later load_more is a refresh, and the seen memory still prevents repeats)."""
    queue_key, impression_key = _keys(reader)
    ttl = settings.FEED_DELIVERY_CACHE_SECONDS
    try:
        with get_redis().pipeline(transaction=True) as pipe:
            pipe.delete(queue_key)
            if ids:
                pipe.rpush(queue_key, *ids)
                pipe.expire(queue_key, ttl)
            pipe.set(impression_key, impression_id, ex=ttl)
            pipe.execute()
    except redis.RedisError as exc:
        log.warning("delivery cache unavailable (%s); has_more is false", exc.__class__.__name__)
        return False
    return bool(ids)


def feed_deliveries_prune() -> int:
    """Forget deliveries older than the seen window (the maintenance job); returns how many."""
    cutoff = timezone.now() - timedelta(days=settings.FEED_SEEN_DAYS)
    deleted, _ = FeedDelivery.objects.filter(delivered_at__lt=cutoff).delete()
    return deleted
