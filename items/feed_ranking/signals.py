"""The feed's signals and the score of one item for one reader (docs/feed.md#signals): pure functions over facts
loaded beforehand, so the feed, the admin's "why this item" and a match push all score the same way."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import cast

import numpy as np
from django.conf import settings

# Broadcast types read against what the reader seeks (they offer or tell something); a demand is read against
# what the reader offers (a need it could fulfil).
SEEKS_SIDE = frozenset({"supply", "info", "alert"})
SIGNALS = (
    "match",
    "concepts",
    "competition",
    "overlap",
    "quality",
    "freshness",
    "feedback",
    "own_feedback",
    "neighbours",
    "trending",
    "official",
)
_DEFAULT_QUALITY = 0.5  # an item the analyzer gave no quality score is taken as middling


@dataclass(frozen=True)
class Knobs:
    """The ranking's settings, read once per ranking (a settings lookup per item and signal costs more than the
    arithmetic)."""

    match_floor: float
    other_side: float
    half_lives: dict[str, float]
    feedback_prior: float
    feedback_smoothing: float
    trending_saturation: float
    trending_half_life: float
    official_hours: float

    @classmethod
    def current(cls) -> Knobs:
        return cls(
            match_floor=settings.FEED_MATCH_FLOOR,
            other_side=settings.FEED_MATCH_OTHER_SIDE,
            half_lives=dict(settings.FEED_HALF_LIFE_HOURS),
            feedback_prior=settings.FEED_FEEDBACK_PRIOR,
            feedback_smoothing=settings.FEED_FEEDBACK_SMOOTHING,
            trending_saturation=settings.FEED_TRENDING_SATURATION,
            trending_half_life=settings.FEED_TRENDING_HALF_LIFE_HOURS,
            official_hours=settings.FEED_OFFICIAL_HOURS,
        )


@dataclass
class ReaderContext:
    """What the ranking knows of the reader: its vectors, keywords, what it scored, what similar readers liked."""

    agent_id: int
    knobs: Knobs = field(default_factory=Knobs.current)
    seeks: np.ndarray | None = None
    offers: np.ndarray | None = None
    # Each side's vectors: the whole text's, then each clause's; an item is as close as its closest one.
    seeks_parts: list[np.ndarray] = field(default_factory=list)
    offers_parts: list[np.ndarray] = field(default_factory=list)
    keywords: frozenset[str] = frozenset()
    seeks_concepts: frozenset[int] = frozenset()
    offers_concepts: frozenset[int] = frozenset()
    # Embeddings of items the reader scored or acted on, with a weight: positive for +1/+2 and feed events,
    # negative for -1.
    judged: list[tuple[np.ndarray, float]] = field(default_factory=list)
    # item id -> summed similarity of the similar readers who scored it well.
    neighbour_likes: dict[int, float] = field(default_factory=dict)


@dataclass(frozen=True)
class ItemFacts:
    """What the ranking knows of an item."""

    item_id: int
    author_id: int
    broadcast_type: str
    keywords: tuple[str, ...]
    domains: tuple[str, ...]
    quality: float | None
    completed_at: datetime
    embedding: np.ndarray | None
    concepts: frozenset[int] = frozenset()
    author_official: bool = False
    readers: int = 0
    score_sum: int = 0
    consumed: int = 0
    engagement: float = 0.0  # trending: decayed engagement counters
    stats_updated_at: datetime | None = None
    # Filled in one matrix product for all candidates (with_similarities): the nearest cosine to each profile
    # side, and the strongest resemblance to what the reader scored well ("up") and -1 ("down").
    similarities: dict[str, float] | None = None


@dataclass(frozen=True)
class Scored:
    facts: ItemFacts
    total: float
    parts: dict[str, float]  # weighted contribution of each signal (the "why this item")


def unit(vector) -> np.ndarray | None:
    if vector is None:
        return None
    array = np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(array))
    return array / norm if norm > 0 else None


def _lifted(cosine: float, floor: float) -> float:
    """A cosine similarity mapped to 0..1 above the embedding's noise floor."""
    return max(0.0, (cosine - floor) / (1.0 - floor))


def _sides(reader: ReaderContext, item: ItemFacts) -> tuple[str, str | None]:
    """Which profile side an item is read against, and which other side counts FEED_MATCH_OTHER_SIDE as much:
    supply against what the reader seeks (one offering what the reader offers is a competitor), demand against
    what it offers (a need it could fulfil; by its seeks when it offers nothing), info and alerts against its
    seeks and, less, its offers (news of its own trade)."""
    if item.broadcast_type == "supply":
        return "seeks", None
    if item.broadcast_type == "demand":
        return ("offers", None) if reader.offers is not None or reader.offers_concepts else ("seeks", None)
    return "seeks", "offers"


def match_signal(reader: ReaderContext, item: ItemFacts) -> float:
    """Complementarity by meaning: the item's embedding against the reader's seeks or offers vector."""
    if item.embedding is None:
        return 0.0
    primary, other = _sides(reader, item)
    best = 0.0
    for side, factor in ((primary, 1.0), (other, reader.knobs.other_side)):
        if side:
            best = max(best, factor * _meaning(reader, item, side))
    return best


def _meaning(reader: ReaderContext, item: ItemFacts, side: str) -> float:
    """The item's closeness to one side of the profile: its nearest vector (whole, or one clause), 0..1."""
    if item.similarities is None:
        return 0.0
    return _lifted(item.similarities[side], reader.knobs.match_floor)


SIMILARITY_COLUMNS = ("seeks", "offers", "up", "down")


def similarity_matrix(reader: ReaderContext, matrix: np.ndarray) -> np.ndarray:
    """For each row of `matrix` (unit item embeddings), its nearest cosine to each profile side and its strongest
    resemblance to what the reader scored well ("up") and -1 ("down"), as the columns of SIMILARITY_COLUMNS:
    matrix products, not a dot product per pair."""
    count = len(matrix)
    nothing = np.full(count, -1.0)

    def nearest(vectors: list[np.ndarray]) -> np.ndarray:
        return (matrix @ np.stack(vectors).T).max(axis=1) if vectors else nothing

    seeks, offers = nearest(reader.seeks_parts), nearest(reader.offers_parts)
    up = down = np.zeros(count)
    if reader.judged:
        weights = np.array([weight for _, weight in reader.judged])
        floor = reader.knobs.match_floor
        lifted = np.clip((matrix @ np.stack([vector for vector, _ in reader.judged]).T - floor) / (1 - floor), 0, None)
        up = (lifted * np.clip(weights, 0, 1)).max(axis=1)
        down = (lifted * np.clip(-weights, 0, 1)).max(axis=1)
    return np.stack([seeks, offers, up, down], axis=1).astype(np.float64)


def similarity_rows(reader: ReaderContext, matrix: np.ndarray) -> list[dict[str, float]]:
    """similarity_matrix as one dictionary per row (ItemFacts.similarities)."""
    return [dict(zip(SIMILARITY_COLUMNS, row, strict=True)) for row in similarity_matrix(reader, matrix).tolist()]


def with_similarities(reader: ReaderContext, items: list[ItemFacts]) -> list[ItemFacts]:
    """The items with their similarities to the reader's vectors (similarity_rows) filled where missing."""
    embedded = [item for item in items if item.embedding is not None and item.similarities is None]
    if not embedded:
        return items
    rows = similarity_rows(reader, np.stack([cast(np.ndarray, item.embedding) for item in embedded]))  # none is None
    filled = {item.item_id: replace(item, similarities=row) for item, row in zip(embedded, rows, strict=True)}
    return [filled.get(item.item_id, item) for item in items]


def concepts_signal(reader: ReaderContext, item: ItemFacts) -> float:
    """Complementarity across languages: lexicon concepts the item shares with the same side (two make 1)."""
    primary, other = _sides(reader, item)
    best = 0.0
    for side, factor in ((primary, 1.0), (other, reader.knobs.other_side)):
        if side:
            shared = getattr(reader, f"{side}_concepts") & item.concepts
            best = max(best, factor * min(1.0, len(shared) / 2))
    return best


def _side_similarity(reader: ReaderContext, item: ItemFacts, side: str) -> float:
    meaning = _meaning(reader, item, side)
    words = min(1.0, len(getattr(reader, f"{side}_concepts") & item.concepts) / 2)
    return max(meaning, words)


def competition_signal(reader: ReaderContext, item: ItemFacts) -> float:
    """How much more an item resembles the reader's own side than the side it is read against: a supply of what
    the reader itself offers, a demand for what it seeks too. Counted against the item (a negative weight)."""
    if item.broadcast_type not in ("supply", "demand") or (reader.offers is None and not reader.offers_concepts):
        return 0.0
    against, own = ("seeks", "offers") if item.broadcast_type == "supply" else ("offers", "seeks")
    return -max(0.0, _side_similarity(reader, item, own) - _side_similarity(reader, item, against))


def overlap_signal(reader: ReaderContext, item: ItemFacts) -> float:
    tags = {tag.casefold() for tag in (*item.keywords, *item.domains)}
    return min(1.0, len(reader.keywords & tags) / 2)


def quality_signal(item: ItemFacts) -> float:
    return _DEFAULT_QUALITY if item.quality is None else float(item.quality)


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


def own_feedback_signal(item: ItemFacts) -> float:
    """Like what the reader scored well, unlike what it scored -1: the strongest resemblance on each side."""
    if item.similarities is None:
        return 0.0
    return item.similarities["up"] - item.similarities["down"]


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


def weights() -> dict[str, float]:
    return {name: float(getattr(settings, f"FEED_WEIGHT_{name.upper()}")) for name in SIGNALS}


def score_item(reader: ReaderContext, item: ItemFacts, *, now: datetime, weights: dict[str, float]) -> Scored:
    """The item's score for this reader: the weighted sum of its signals, with each contribution kept. Score many
    items with their similarities filled in one go (with_similarities) first; one item is filled here."""
    if item.similarities is None and item.embedding is not None:
        (item,) = with_similarities(reader, [item])
    raw = {
        "match": match_signal(reader, item),
        "concepts": concepts_signal(reader, item),
        "competition": competition_signal(reader, item),
        "overlap": overlap_signal(reader, item),
        "quality": quality_signal(item),
        "freshness": freshness_signal(item, now, reader.knobs),
        "feedback": feedback_signal(item, reader.knobs),
        "own_feedback": own_feedback_signal(item),
        "neighbours": neighbours_signal(reader, item),
        "trending": trending_signal(item, now, reader.knobs),
        "official": official_signal(item, now, reader.knobs),
    }
    parts = {name: weights[name] * value for name, value in raw.items()}
    return Scored(facts=item, total=sum(parts.values()), parts=parts)
