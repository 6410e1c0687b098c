"""The impression log (docs/feed-log.md): every feed page served becomes one outbox event on stream:replay:log,
which the cg:replay:log consumer turns into one FeedImpression row per item.

The page's write on the request path is that one outbox row; the rows per item are written off the request
path, idempotently (a page's event id and each position are a unique key)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence

import redis
from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from eigenflux.base.redis import get_redis
from items.events import FEED_PAGE_SERVED, STREAM_REPLAY_LOG
from items.models import Agent, FeedImpression, FeedName, ProcessedItem
from items.outbox import outbox_event_create
from items.ranker.contract import CONTRACT

log = logging.getLogger(__name__)

SCORE_DIGITS = 6
# The version logged for a page in plain newest-first order (the unseen feed without `for_me`): not the ranking.
RECENCY_VERSION = "recency"


class BadPage(ValueError):
    """A page event that cannot be logged (the consumer dead-letters it)."""


def impressions_record(
    *,
    reader: Agent,
    items: Sequence[ProcessedItem],
    feed: str,
    scores: Sequence[float | None] | None = None,
    delivery_id: str = "",
    ranking_version: str | None = None,
    features: Sequence[Sequence[float] | None] | None = None,
    propensities: Sequence[float] | None = None,
) -> bool:
    """Log one feed page served to `reader` (items in the order served, with the ranking's score of each when it
    has one) under `ranking_version` (default FEED_RANKING_VERSION); False for an empty page, which logs nothing.
    Joins the caller's transaction when there is one, so a page and its log commit together.

    Positions count from 1 across a delivery (`delivery_id`, the unseen feed's impression id): a load_more page
    continues where the pages before it stopped. With `features` (the ranker contract's vector of each item)
    and `propensities` (each one's probability of being placed there), the page trains the learned ranker
    (docs/feed-ranker.md)."""
    if feed not in FeedName.values:
        raise ValueError(f"feed must be one of {FeedName.values}, got {feed!r}")
    if scores is not None and len(scores) != len(items):
        raise ValueError(f"{len(scores)} scores for {len(items)} items")
    for extra in (features, propensities):
        if extra is not None and len(extra) != len(items):
            raise ValueError(f"{len(extra)} features or propensities for {len(items)} items")
    if not items:
        return False
    data: dict = {
        "reader_id": str(reader.pk),
        "feed": feed,
        "ranking_version": ranking_version or settings.FEED_RANKING_VERSION,
        "delivery_id": delivery_id,
        "first_position": _first_position(delivery_id, len(items)),
        "served_at": timezone.now().isoformat(),
        "item_ids": [str(item.pk) for item in items],
        "scores": [None if s is None else round(float(s), SCORE_DIGITS) for s in (scores or [None] * len(items))],
    }
    if features is not None:
        data["contract"] = CONTRACT
        data["features"] = [None if row is None else [round(float(x), SCORE_DIGITS) for x in row] for row in features]
        data["propensities"] = [round(float(p), SCORE_DIGITS) for p in (propensities or [1.0] * len(items))]
    with transaction.atomic():
        outbox_event_create(stream=STREAM_REPLAY_LOG, event_type=FEED_PAGE_SERVED, subject=str(reader.pk), data=data)
    return True


def ranking_fields(ranked: Sequence | None) -> dict:
    """What impressions_record logs of a ranked page (items.feed_ranking.RankedItem, in the order served): each
    item's score, ranker features and propensity, and the ranking version of a learned model that ranked it;
    nothing for a page that was not ranked here (a load_more page from the delivery cache)."""
    if not ranked:
        return {}
    return {
        "scores": [entry.score for entry in ranked],
        "features": [entry.features for entry in ranked],
        "propensities": [entry.propensity for entry in ranked],
        "ranking_version": next((entry.ranker for entry in ranked if entry.ranker), None),
    }


def _first_position(delivery_id: str, count: int) -> int:
    """Where this page starts in its delivery: a counter per delivery in Redis (one INCRBY), living as long as
    the delivery cache. Without Redis, or without a delivery, the page starts at 1 (and says so in the log)."""
    if not delivery_id:
        return 1
    key = f"feed:impressions:{{{delivery_id}}}:served"
    try:
        with get_redis().pipeline(transaction=True) as pipe:
            pipe.incrby(key, count)
            pipe.expire(key, settings.FEED_DELIVERY_CACHE_SECONDS)
            served, _ = pipe.execute()
    except redis.RedisError as exc:
        log.warning("impression positions: Redis unavailable (%s); this page starts at 1", exc.__class__.__name__)
        return 1
    return int(served) - count + 1


def _page_rows(*, page_id: str, data: dict) -> list[FeedImpression]:
    try:
        page = uuid.UUID(page_id)
        reader_id, first = int(data["reader_id"]), int(data["first_position"])
        item_ids = [int(pk) for pk in data["item_ids"]]
        scores = data["scores"]
        served_at = parse_datetime(data["served_at"])
        feed, version = data["feed"], str(data["ranking_version"])[:64]
        features = data.get("features") or [None] * len(item_ids)
        propensities = data.get("propensities") or [None] * len(item_ids)
        contract = str(data.get("contract") or "")[:32] if data.get("features") else ""
    except (KeyError, TypeError, ValueError) as exc:
        raise BadPage(f"page event without its fields: {exc}") from exc
    sizes = {len(item_ids), len(scores), len(features), len(propensities)}
    if feed not in FeedName.values or served_at is None or len(sizes) != 1 or first < 1:
        raise BadPage(f"page event with a bad feed, time, scores or position: {data!r}"[:500])
    return [
        FeedImpression(
            page_id=page,
            reader_id=reader_id,
            item_id=item_id,
            position=first + index,
            score=None if score is None else float(score),
            feed=feed,
            ranking_version=version,
            delivery_id=str(data.get("delivery_id") or "")[:64],
            served_at=served_at,
            contract=contract if vector else "",
            features=vector or None,
            propensity=None if propensity is None else float(propensity),
        )
        for index, (item_id, score, vector, propensity) in enumerate(
            zip(item_ids, scores, features, propensities, strict=True)
        )
    ]


def impressions_store(*, page_id: str, data: dict) -> int:
    """Write the rows of one page event (the consumer's side); a page already written writes nothing again.
    Returns the page's size. Raises BadPage for an event that does not describe a page."""
    rows = _page_rows(page_id=page_id, data=data)
    FeedImpression.objects.bulk_create(rows, ignore_conflicts=True)
    return len(rows)
