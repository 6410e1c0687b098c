"""The feed's ranking (docs/feed.md): candidates from a few bounded sources, each scored for the reader by a
weighted sum of signals, arranged into pages with diversity caps and exploration slots. Both feeds (the native
`for_me` / `unseen` feed and the EigenFlux client's feed poll) serve this ranking."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

import numpy as np
from django.utils import timezone

from items.feed_ranking.context import item_facts, servable_facts
from items.feed_ranking.pages import explorable_flags, paginate
from items.feed_ranking.readers import reader_context, reader_contexts
from items.feed_ranking.scoring import raw_signals, score_many, score_signals
from items.feed_ranking.signals import (
    SIGNALS,
    ItemFacts,
    ReaderContext,
    Scored,
    weights,
)
from items.models import Agent, ProcessedItem
from items.ranker.contract import feature_matrix
from items.ranker.serving import ranker_apply
from items.selectors import with_raw

__all__ = [
    "SIGNALS",
    "RankedItem",
    "rank_entries",
    "rank_feed",
    "ranked_items",
    "score_for_reader",
    "scores_for_readers",
]


@dataclass(frozen=True)
class RankedItem:
    item: ProcessedItem
    score: float
    parts: dict[str, float]
    features: list[float] | None = None  # the ranker contract's vector (docs/feed-ranker.md), logged when served
    propensity: float = 1.0
    ranker: str = ""  # the ranking version of a learned model that ranked it; "" for the formula


def _scored(context: ReaderContext, facts: list[ItemFacts], now: datetime) -> list[Scored]:
    """The formula's scores, replaced by the active learned model's for a reader with history (the ranker's
    serving side, items.ranker.serving); each entry carries its feature vector either way."""
    if not facts:
        return []
    raw = raw_signals(context, facts, now=now)
    history = bool(context.judged)
    kinds = [item.broadcast_type for item in facts]
    matrix = feature_matrix(raw, kinds, np.array(explorable_flags(facts, now=now)), history, context.type_judgments)
    return ranker_apply(score_signals(facts, raw, weights=weights(), features=matrix), matrix, reader_history=history)


def rank_entries(
    *,
    reader: Agent,
    page_size: int,
    depth: int,
    broadcast_type: str | None = None,
    domain: str | None = None,
    seen_since: datetime | None = None,
) -> list[Scored]:
    """The ranking as scored facts (no model instances): what rank_feed returns, for a caller that loads only
    the items it serves."""
    now = timezone.now()
    context = reader_context(reader)
    servable = servable_facts(
        reader, context, broadcast_type=broadcast_type, domain=domain, seen_since=seen_since, now=now
    )
    return paginate(_scored(context, servable, now), page_size=page_size, now=now, depth=depth)


def ranked_items(entries: list[Scored]) -> list[RankedItem]:
    """The entries with their items (one query), in the same order; an item gone meanwhile is left out."""
    ids = [entry.facts.item_id for entry in entries]
    rows = {item.pk: item for item in with_raw(ProcessedItem.objects.filter(pk__in=ids))}
    return [
        RankedItem(
            item=rows[entry.facts.item_id],
            score=entry.total,
            parts=entry.parts,
            features=None if entry.features is None else entry.features.tolist(),
            propensity=entry.propensity,
            ranker=entry.ranker,
        )
        for entry in entries
        if entry.facts.item_id in rows
    ]


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
    entries = rank_entries(
        reader=reader,
        page_size=page_size,
        depth=depth,
        broadcast_type=broadcast_type,
        domain=domain,
        seen_since=seen_since,
    )
    return ranked_items(entries)


def score_for_reader(*, reader: Agent, item: ProcessedItem) -> RankedItem:
    """One item's score for one reader, broken down by signal: the admin's "why this item", and the test a match
    push can apply to a new item."""
    ((_, ranked),) = scores_for_readers(readers=[reader], item=item)
    return ranked


def scores_for_readers(*, readers: Iterable[Agent], item: ProcessedItem) -> list[tuple[Agent, RankedItem]]:
    """score_for_reader for several readers of one item (a match push): the item's facts are read once and the
    readers' contexts together (readers.reader_contexts), not once per reader."""
    now = timezone.now()
    facts = item_facts([item.pk])[item.pk]
    readers = list(readers)
    current = weights()
    scored = []
    for reader, context in zip(readers, reader_contexts(readers, only_items={item.pk}), strict=True):
        (entry,) = score_many(context, [facts], now=now, weights=current)
        scored.append((reader, RankedItem(item=item, score=entry.total, parts=entry.parts)))
    return scored
