"""The ranker's feature contract (docs/feed-ranker.md#features): an immutable, versioned list of features, each
read from what the formula ranking already computes. A contract never changes once shipped; a new feature is a
new contract version, so a stored model and a logged vector always agree on what each column means."""

from __future__ import annotations

import hashlib
import json

import numpy as np

CONTRACT = "ranker_features_v1"
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
)
WIDTH = len(FEATURES)


def fingerprint(contract: str = CONTRACT, features: tuple[str, ...] | list[str] = FEATURES) -> str:
    """A short hash of a contract's name and its feature names in order: what a model must carry to be loaded."""
    text = json.dumps([contract, list(features)], separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def type_columns(kinds: list[str]) -> np.ndarray:
    """One-hot broadcast types over TYPE_VOCABULARY + "other" (count x 5)."""
    table = np.zeros((len(kinds), len(TYPE_VOCABULARY) + 1))
    index = {kind: n for n, kind in enumerate(TYPE_VOCABULARY)}
    for row, kind in enumerate(kinds):
        table[row, index.get(kind, len(TYPE_VOCABULARY))] = 1.0
    return table


def feature_matrix(
    raw: dict[str, np.ndarray], kinds: list[str], explorable: np.ndarray, reader_history: bool
) -> np.ndarray:
    """The contract's vectors (count x WIDTH) from the formula's raw signals of each candidate, its broadcast
    type, whether the exploration rule would take it, and whether the reader has any history."""
    count = len(kinds)
    signals = np.stack([np.asarray(raw[name], dtype=float) for name in SIGNAL_FEATURES], axis=1)
    flags = np.stack([np.asarray(explorable, dtype=float), np.full(count, float(reader_history))], axis=1)
    return np.concatenate([signals, type_columns(kinds), flags], axis=1).reshape(count, WIDTH)
