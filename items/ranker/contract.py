"""The ranker's feature contract (docs/feed-ranker.md#features): an immutable, versioned list of features, each
read from what the formula ranking already computes. A contract never changes once shipped; a new feature is a
new contract version, so a stored model and a logged vector always agree on what each column means."""

from __future__ import annotations

import hashlib
import json

import numpy as np

CONTRACT = "ranker_features_v3"
# The formula's raw signals (items.feed_ranking.signals.SIGNALS at v1), before their weights: written out, not
# imported, so that a change of the formula's signals cannot change this contract's shape.
SIGNAL_FEATURES = (
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
# Broadcast types, then one bucket for anything else: a new type lands in "other", the vector keeps its shape.
TYPE_VOCABULARY = ("supply", "demand", "info", "alert")
FEATURES = (
    *SIGNAL_FEATURES,
    *(f"type={kind}" for kind in TYPE_VOCABULARY),
    "type=other",
    "explorable",  # the page's exploration rule would take it (fresh, decent, unjudged)
    "reader_history",  # the reader has judged something (a score or a feed event)
    "own_type_up",  # the share of the reader's positive judgments on the item's type (smoothed)
    "own_type_down",  # the share of the reader's -1s on the item's type (smoothed)
    # v3: how much the item resembles what the reader liked beyond what its profile says (own_feedback, when
    # positive, times 1 - match): a taste the reader found in its feed but never stated. The better the profile
    # matches an item, the less it scores, so the model can weigh it without ranking those items higher still.
    "own_beyond_profile",
)
WIDTH = len(FEATURES)
# Each type bucket starts with this much weight on both sides: a reader with no judgments sits at the uniform
# share, one with a few moves part of the way.
TYPE_PRIOR = 1.0


def fingerprint(contract: str = CONTRACT, features: tuple[str, ...] | list[str] = FEATURES) -> str:
    """A short hash of a contract's name and its feature names in order: what a model must carry to be loaded."""
    text = json.dumps([contract, list(features)], separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _bucket(kind: str) -> int:
    return TYPE_VOCABULARY.index(kind) if kind in TYPE_VOCABULARY else len(TYPE_VOCABULARY)


def type_columns(kinds: list[str]) -> np.ndarray:
    """One-hot broadcast types over TYPE_VOCABULARY + "other" (count x 5)."""
    table = np.zeros((len(kinds), len(TYPE_VOCABULARY) + 1))
    for row, kind in enumerate(kinds):
        table[row, _bucket(kind)] = 1.0
    return table


def own_type_columns(kinds: list[str], type_judgments: dict[str, tuple[float, float]]) -> np.ndarray:
    """For each item, the share of the reader's positive weight, then of its -1 weight, that went to items of the
    item's type bucket, each side smoothed by TYPE_PRIOR per bucket (count x 2; 1/5 each with no judgments)."""
    buckets = len(TYPE_VOCABULARY) + 1
    sums = np.full((buckets, 2), TYPE_PRIOR)
    for kind, (up, down) in type_judgments.items():
        sums[_bucket(kind)] += (up, down)
    shares = sums / sums.sum(axis=0)
    return shares[[_bucket(kind) for kind in kinds]].reshape(len(kinds), 2)


def feature_matrix(
    raw: dict[str, np.ndarray],
    kinds: list[str],
    explorable: np.ndarray,
    reader_history: bool,
    type_judgments: dict[str, tuple[float, float]] | None = None,
) -> np.ndarray:
    """The contract's vectors (count x WIDTH) from the formula's raw signals of each candidate, its broadcast
    type, whether the exploration rule would take it, whether the reader has any history, the reader's
    judgments by broadcast type, and how far its resemblance to what the reader liked goes beyond the profile."""
    count = len(kinds)
    signals = np.stack([np.asarray(raw[name], dtype=float) for name in SIGNAL_FEATURES], axis=1)
    flags = np.stack([np.asarray(explorable, dtype=float), np.full(count, float(reader_history))], axis=1)
    own = own_type_columns(kinds, type_judgments or {})
    match = np.clip(np.asarray(raw["match"], dtype=float), 0.0, 1.0)
    beyond = (np.maximum(0.0, np.asarray(raw["own_feedback"], dtype=float)) * (1.0 - match))[:, None]
    return np.concatenate([signals, type_columns(kinds), flags, own, beyond], axis=1).reshape(count, WIDTH)
