"""The feed's signals (docs/feed.md#signals) as arrays over all the candidates of a ranking, so several hundred
candidates cost a few matrix operations instead of a Python call per item and signal; one item (the admin's "why
this item", a match push) is a list of one. A per-item reference written for reading lives with the tests
(tests/items/feed/reference_scoring.py), which hold score_many to it item for item and signal for signal."""

from __future__ import annotations

import math
from datetime import datetime

import numpy as np

from items.feed_ranking.signals import (
    DEFAULT_QUALITY,
    SIGNALS,
    ItemFacts,
    Knobs,
    ReaderContext,
    Scored,
    similarity_matrix,
)


def _lifted(cosines: np.ndarray, floor: float) -> np.ndarray:
    return np.maximum(0.0, (cosines - floor) / (1.0 - floor))


def _similarities(reader: ReaderContext, items: list[ItemFacts]) -> tuple[np.ndarray, np.ndarray]:
    """(count x 4 similarities as signals.similarity_matrix, which items have an embedding)."""
    has = np.array([item.embedding is not None for item in items], dtype=bool)
    table = np.zeros((len(items), 4))
    if has.any():
        table[has] = similarity_matrix(
            reader, np.stack([item.embedding for item in items if item.embedding is not None])
        )
    return table, has


def _shared(reader: ReaderContext, items: list[ItemFacts]) -> tuple[np.ndarray, np.ndarray]:
    """Per item, the lexicon concepts it shares with each side of the profile, as a 0..1 word match (two make 1)."""
    seeks, offers = reader.seeks_concepts, reader.offers_concepts
    shared = np.array([(len(seeks & item.concepts), len(offers & item.concepts)) for item in items], dtype=float)
    words = np.minimum(1.0, shared.reshape(-1, 2) / 2)
    return words[:, 0], words[:, 1]


def _complementarity(reader: ReaderContext, items: list[ItemFacts]) -> dict[str, np.ndarray]:
    """match, concepts and competition (signals.match_signal, concepts_signal, competition_signal)."""
    knobs = reader.knobs
    table, has = _similarities(reader, items)
    meaning_seeks = np.where(has, _lifted(table[:, 0], knobs.match_floor), 0.0)
    meaning_offers = np.where(has, _lifted(table[:, 1], knobs.match_floor), 0.0)
    words_seeks, words_offers = _shared(reader, items)
    kinds = np.array([item.broadcast_type for item in items], dtype=object)
    supply, demand = kinds == "supply", kinds == "demand"
    offers_side = reader.offers is not None or bool(reader.offers_concepts)
    on_offers = demand & offers_side  # a demand is read against what the reader offers, when it offers anything
    both_sides = ~supply & ~demand  # info and alerts: the seeks, and the offers FEED_MATCH_OTHER_SIDE as much

    def best(seeks: np.ndarray, offers: np.ndarray) -> np.ndarray:
        primary = np.maximum(0.0, np.where(on_offers, offers, seeks))
        return np.maximum(primary, np.where(both_sides, knobs.other_side * offers, 0.0))

    side_seeks = np.maximum(meaning_seeks, words_seeks)
    side_offers = np.maximum(meaning_offers, words_offers)
    # A supply of what the reader offers, a demand for what it seeks too: how much more it resembles the own side.
    excess = np.where(supply, side_offers - side_seeks, side_seeks - side_offers)
    competing = (supply | demand) & offers_side
    return {
        "match": np.where(has, best(meaning_seeks, meaning_offers), 0.0),
        "concepts": best(words_seeks, words_offers),
        "competition": np.where(competing, -np.maximum(0.0, excess), 0.0),
        "own_feedback": np.where(has, table[:, 2] - table[:, 3], 0.0),
    }


def _hours(now: datetime, moments: list[datetime | None]) -> np.ndarray:
    return np.array([0.0 if at is None else max(0.0, (now - at).total_seconds() / 3600) for at in moments])


def _item_signals(reader: ReaderContext, items: list[ItemFacts], now: datetime) -> dict[str, np.ndarray]:
    """The signals that read the item alone, or the reader's keywords and neighbours (signals.py's others)."""
    knobs: Knobs = reader.knobs
    ages = np.array([(now - item.completed_at).total_seconds() for item in items])
    half_lives = np.array([knobs.half_lives.get(item.broadcast_type, knobs.half_lives["info"]) for item in items])
    readers = np.array([item.readers for item in items], dtype=float)
    score_sums = np.array([item.score_sum for item in items], dtype=float)
    prior, smoothing = knobs.feedback_prior, knobs.feedback_smoothing
    scored = readers + smoothing > 0
    smoothed = (score_sums + prior * smoothing) / np.where(scored, readers + smoothing, 1.0)
    engagement = np.array([item.engagement for item in items], dtype=float)
    stats_at = [item.stats_updated_at for item in items]
    trending = np.array([item.engagement > 0 and item.stats_updated_at is not None for item in items], dtype=bool)
    level = np.minimum(1.0, np.log1p(np.maximum(engagement, 0.0)) / math.log1p(knobs.trending_saturation))
    keywords, likes = reader.keywords, reader.neighbour_likes
    return {
        "overlap": np.array(
            [
                min(1.0, len(keywords & {tag.casefold() for tag in (*item.keywords, *item.domains)}) / 2)
                for item in items
            ]
        ),
        "quality": np.array([DEFAULT_QUALITY if item.quality is None else float(item.quality) for item in items]),
        "freshness": 0.5 ** (np.maximum(0.0, ages / 3600) / half_lives),
        "feedback": np.where(scored, (smoothed - prior) / 2, 0.0),
        "neighbours": np.array([min(1.0, likes.get(item.item_id, 0.0)) for item in items]),
        "trending": np.where(trending, level * 0.5 ** (_hours(now, stats_at) / knobs.trending_half_life), 0.0),
        "official": np.array([item.author_official for item in items], dtype=bool)
        & (ages <= knobs.official_hours * 3600),
    }


def score_many(
    reader: ReaderContext, items: list[ItemFacts], *, now: datetime, weights: dict[str, float]
) -> list[Scored]:
    """Each of `items` scored for the reader, computed as arrays: the weighted signals and their sum."""
    if not items:
        return []
    return score_signals(items, raw_signals(reader, items, now=now), weights=weights)


def raw_signals(reader: ReaderContext, items: list[ItemFacts], *, now: datetime) -> dict[str, np.ndarray]:
    """Each signal of each item before its weight (the learned ranker's features read them too)."""
    return {**_complementarity(reader, items), **_item_signals(reader, items, now)}


def score_signals(
    items: list[ItemFacts],
    raw: dict[str, np.ndarray],
    *,
    weights: dict[str, float],
    features: np.ndarray | None = None,
) -> list[Scored]:
    """The formula: each item's weighted signals and their sum (with each one's ranker features, when given)."""
    if not items:
        return []
    parts = np.stack([weights[name] * raw[name].astype(float) for name in SIGNALS], axis=1)
    totals = np.zeros(len(items))
    for column in range(len(SIGNALS)):  # left to right, as score_item's sum()
        totals = totals + parts[:, column]
    vectors = [None] * len(items) if features is None else list(features)
    return [
        Scored(facts=item, total=total, parts=dict(zip(SIGNALS, row, strict=True)), features=vector)
        for item, total, row, vector in zip(items, totals.tolist(), parts.tolist(), vectors, strict=True)
    ]
