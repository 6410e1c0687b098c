"""The feed's signals one item at a time, written for reading rather than speed: the oracle that
items.feed_ranking.scoring.score_many (the arrays the feed uses) must agree with item for item
(tests/items/feed/test_scoring.py). docs/feed.md#signals describes each signal."""

from __future__ import annotations

import math
from datetime import datetime

import numpy as np

from items.feed_ranking.signals import (
    DEFAULT_QUALITY,
    SIMILARITY_COLUMNS,
    ItemFacts,
    Knobs,
    ReaderContext,
    Scored,
    similarity_matrix,
)

Similarities = dict[str, float] | None  # the item's row of similarity_matrix, None without an embedding


def _lifted(cosine: float, floor: float) -> float:
    """A cosine similarity mapped to 0..1 above the embedding's noise floor."""
    return max(0.0, (cosine - floor) / (1.0 - floor))


def _sides(reader: ReaderContext, item: ItemFacts) -> tuple[str, str | None]:
    """Which profile side an item is read against, and which other side counts FEED_MATCH_OTHER_SIDE as much:
    supply against what the reader seeks, demand against what it offers (by its seeks when it offers nothing),
    info and alerts against its seeks and, less, its offers."""
    if item.broadcast_type == "supply":
        return "seeks", None
    if item.broadcast_type == "demand":
        return ("offers", None) if reader.offers is not None or reader.offers_concepts else ("seeks", None)
    return "seeks", "offers"


def _meaning(reader: ReaderContext, similarities: Similarities, side: str) -> float:
    """The item's closeness to one side of the profile: its nearest vector (whole, or one clause), 0..1."""
    if similarities is None:
        return 0.0
    return _lifted(similarities[side], reader.knobs.match_floor)


def match_signal(reader: ReaderContext, item: ItemFacts, similarities: Similarities) -> float:
    """Complementarity by meaning: the item's embedding against the reader's seeks or offers vector."""
    return _best_side(reader, item, lambda side: _meaning(reader, similarities, side))


def _words(reader: ReaderContext, item: ItemFacts, side: str) -> float:
    return min(1.0, len(getattr(reader, f"{side}_concepts") & item.concepts) / 2)


def concepts_signal(reader: ReaderContext, item: ItemFacts) -> float:
    """Complementarity across languages: lexicon concepts the item shares with the same side (two make 1)."""
    return _best_side(reader, item, lambda side: _words(reader, item, side))


def _best_side(reader: ReaderContext, item: ItemFacts, measure) -> float:
    """The better of the item read against its primary side and, discounted, against the other one."""
    primary, other = _sides(reader, item)
    best = 0.0
    for side, factor in ((primary, 1.0), (other, reader.knobs.other_side)):
        if side:
            best = max(best, factor * measure(side))
    return best


def competition_signal(reader: ReaderContext, item: ItemFacts, similarities: Similarities) -> float:
    """How much more an item resembles the reader's own side than the side it is read against (negative)."""
    if item.broadcast_type not in ("supply", "demand") or (reader.offers is None and not reader.offers_concepts):
        return 0.0
    against, own = ("seeks", "offers") if item.broadcast_type == "supply" else ("offers", "seeks")

    def resemblance(side: str) -> float:
        return max(_meaning(reader, similarities, side), _words(reader, item, side))

    return -max(0.0, resemblance(own) - resemblance(against))


def overlap_signal(reader: ReaderContext, item: ItemFacts) -> float:
    tags = {tag.casefold() for tag in (*item.keywords, *item.domains)}
    return min(1.0, len(reader.keywords & tags) / 2)


def quality_signal(item: ItemFacts) -> float:
    return DEFAULT_QUALITY if item.quality is None else float(item.quality)


def freshness_signal(item: ItemFacts, now: datetime, knobs: Knobs) -> float:
    hours = max(0.0, (now - item.completed_at).total_seconds() / 3600)
    half_life = knobs.half_lives.get(item.broadcast_type, knobs.half_lives["info"])
    return 0.5 ** (hours / half_life)


def feedback_signal(item: ItemFacts, knobs: Knobs) -> float:
    """Readers' mean score shrunk towards the prior, as a distance from the prior (0 with no scores), over 2."""
    prior, weight = knobs.feedback_prior, knobs.feedback_smoothing
    if item.readers + weight <= 0:
        return 0.0
    smoothed = (item.score_sum + prior * weight) / (item.readers + weight)
    return (smoothed - prior) / 2


def own_feedback_signal(similarities: Similarities) -> float:
    """Like what the reader scored well, unlike what it scored -1: the strongest resemblance on each side."""
    if similarities is None:
        return 0.0
    return similarities["up"] - similarities["down"]


def neighbours_signal(reader: ReaderContext, item: ItemFacts) -> float:
    return min(1.0, reader.neighbour_likes.get(item.item_id, 0.0))


def trending_signal(item: ItemFacts, now: datetime, knobs: Knobs) -> float:
    if item.engagement <= 0 or item.stats_updated_at is None:
        return 0.0
    hours = max(0.0, (now - item.stats_updated_at).total_seconds() / 3600)
    level = min(1.0, math.log1p(item.engagement) / math.log1p(knobs.trending_saturation))
    return level * 0.5 ** (hours / knobs.trending_half_life)


def official_signal(item: ItemFacts, now: datetime, knobs: Knobs) -> float:
    """The official agent's items by their own rule: announcements reach everyone while they are recent."""
    if not item.author_official:
        return 0.0
    return float((now - item.completed_at).total_seconds() <= knobs.official_hours * 3600)


def score_item(reader: ReaderContext, item: ItemFacts, *, now: datetime, weights: dict[str, float]) -> Scored:
    """The item's score for this reader: the weighted sum of its signals, with each contribution kept."""
    similarities: Similarities = None
    if item.embedding is not None:
        row = similarity_matrix(reader, np.asarray(item.embedding)[None, :])[0].tolist()
        similarities = dict(zip(SIMILARITY_COLUMNS, row, strict=True))
    raw = {
        "match": match_signal(reader, item, similarities),
        "concepts": concepts_signal(reader, item),
        "competition": competition_signal(reader, item, similarities),
        "overlap": overlap_signal(reader, item),
        "quality": quality_signal(item),
        "freshness": freshness_signal(item, now, reader.knobs),
        "feedback": feedback_signal(item, reader.knobs),
        "own_feedback": own_feedback_signal(similarities),
        "neighbours": neighbours_signal(reader, item),
        "trending": trending_signal(item, now, reader.knobs),
        "official": official_signal(item, now, reader.knobs),
    }
    parts = {name: weights[name] * value for name, value in raw.items()}
    return Scored(facts=item, total=sum(parts.values()), parts=parts)
