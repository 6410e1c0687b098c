"""What the feed's signals read (docs/feed.md#signals): the facts of an item, the reader's context, the ranking's
settings and weights, and the similarity matrix; items.feed_ranking.scoring computes the signals from them, as
arrays over all the candidates, for the feed, the admin's "why this item" and a match push alike."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

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
DEFAULT_QUALITY = 0.5  # an item the analyzer gave no quality score is taken as middling


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
    # broadcast type -> (summed positive weight, summed -1 weight) of the same judgments: the learned ranker's
    # per-reader type preference (items.ranker.contract).
    type_judgments: dict[str, tuple[float, float]] = field(default_factory=dict)
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


@dataclass(frozen=True)
class Scored:
    facts: ItemFacts
    total: float
    parts: dict[str, float]  # weighted contribution of each signal (the "why this item")
    # The learned ranker's side (docs/feed-ranker.md): the item's feature vector under the contract, the
    # probability the page's policy had of placing it where it is, and what ranked it ("" for the formula).
    features: np.ndarray | None = field(default=None, compare=False, repr=False)
    propensity: float = 1.0
    ranker: str = ""


def unit(vector) -> np.ndarray | None:
    if vector is None:
        return None
    array = np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(array))
    return array / norm if norm > 0 else None


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


def weights() -> dict[str, float]:
    return {name: float(getattr(settings, f"FEED_WEIGHT_{name.upper()}")) for name in SIGNALS}
