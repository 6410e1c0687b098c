"""The feed's ranking (docs/feed.md): candidates from a few bounded sources, each scored for the reader by a
weighted sum of signals, arranged into pages with diversity caps and exploration slots. Both feeds (the native
`for_me` / `unseen` feed and the EigenFlux client's feed poll) serve this ranking."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone

from items.feed_ranking import candidates
from items.feed_ranking.context import item_facts, reader_context
from items.feed_ranking.pages import paginate
from items.feed_ranking.signals import SIGNALS, ReaderContext, Scored, score_item, weights, with_similarities
from items.models import Agent, ProcessedItem
from items.selectors import with_raw

__all__ = ["SIGNALS", "RankedItem", "rank_feed", "score_for_reader"]


@dataclass(frozen=True)
class RankedItem:
    item: ProcessedItem
    score: float
    parts: dict[str, float]


def _scored(context: ReaderContext, ids: list[int], now: datetime) -> list[Scored]:
    facts = item_facts(ids, now=now)
    current = weights()
    filled = with_similarities(context, [facts[pk] for pk in ids if pk in facts])
    return [score_item(context, item, now=now, weights=current) for item in filled]


def rank_feed(
    *,
    reader: Agent,
    page_size: int,
    depth: int,
    broadcast_type: str | None = None,
    domain: str | None = None,
    seen_since: datetime | None = None,
) -> list[RankedItem]:
    """The reader's feed, best first, up to `depth` items arranged in pages of `page_size`: never its own items,
    one per similarity group, and (with `seen_since`) no group served to it since then."""
    now = timezone.now()
    context = reader_context(reader)
    found = candidates.nearest_ids(context, broadcast_type=broadcast_type, domain=domain)
    found |= candidates.recent_ids(reader, broadcast_type=broadcast_type, domain=domain)
    found |= candidates.neighbour_ids(context)
    found |= candidates.trending_ids(now=now)
    servable = candidates.servable_ids(
        reader, found, broadcast_type=broadcast_type, domain=domain, seen_since=seen_since
    )
    arranged = paginate(_scored(context, servable, now), page_size=page_size, now=now, depth=depth)
    ids = [entry.facts.item_id for entry in arranged]
    rows = {item.pk: item for item in with_raw(ProcessedItem.objects.filter(pk__in=ids))}
    return [
        RankedItem(item=rows[entry.facts.item_id], score=entry.total, parts=entry.parts)
        for entry in arranged
        if entry.facts.item_id in rows
    ]


def score_for_reader(*, reader: Agent, item: ProcessedItem) -> RankedItem:
    """One item's score for one reader, broken down by signal: the admin's "why this item", and the test a match
    push can apply to a new item."""
    now = timezone.now()
    (entry,) = _scored(reader_context(reader), [item.pk], now)
    return RankedItem(item=item, score=entry.total, parts=entry.parts)
