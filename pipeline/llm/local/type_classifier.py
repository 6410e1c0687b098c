"""The learned layer of the local broadcast type: one-vs-rest logistic regressions over the safety classifier's
hashed character n-grams, in numpy.

The cue words (pipeline.llm.local.types) name a type by its phrases ("looking for", 出租, 譲ります); a post
that says it another way ("we're short a backend dev", 闲置一台, 使わなくなった…を譲ります) has no cue and
was read as info. This model reads the whole post and adds its probabilities to the cue scores. It is
trained on first use (then kept on disk, model_cache.py) from data/types_train.jsonl (written by
`python -m bench.content_sets --write-train`: the search corpus's typed broadcasts, the tuning half of the labelled
type set, and the training-only cases of bench/data/types_train_extra.jsonl).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from eigenflux.base.longlived import loaded_once
from pipeline.llm.local.ngram_fit import DIMENSIONS, design, fit
from pipeline.llm.local.safety_classifier import features, trained_on

TRAINING_PATH = Path(__file__).resolve().parent / "data" / "types_train.jsonl"
TYPES = ("alert", "demand", "supply", "info")  # the more urgent first: types.py breaks ties in this order


@dataclass(frozen=True)
class TypeClassifier:
    weights: np.ndarray  # one row per type in TYPES
    biases: np.ndarray

    def probabilities(self, text: str) -> dict[str, float]:
        """Each type's share: the one-vs-rest probabilities, normalised to sum to one."""
        indices, values = features(text)
        scores = self.weights[:, indices] @ values + self.biases
        odds = 1.0 / (1.0 + np.exp(-np.clip(scores, -30.0, 30.0)))
        shares = odds / max(float(odds.sum()), 1e-9)
        return {kind: float(share) for kind, share in zip(TYPES, shares, strict=True)}


def train(cases: list[dict[str, str]]) -> TypeClassifier:
    """Fits one model per type on labelled cases ({"text", "type"}), deterministically."""
    rows = design([case["text"] for case in cases], features)
    everything = np.arange(rows.rows)
    weights, biases = np.zeros((len(TYPES), DIMENSIONS)), np.zeros(len(TYPES))
    for k, kind in enumerate(TYPES):
        target = np.array([case["type"] == kind for case in cases], dtype=np.float64)
        fitted, biases[k] = fit(rows.data, target, everything)
        weights[k] = rows.full(fitted)
    return TypeClassifier(weights, biases)


@loaded_once("training the learned type model")
def classifier() -> TypeClassifier:
    """The process's model, trained from the shipped training file on first use, or read from the model cache."""
    return trained_on("type", TypeClassifier, train, TRAINING_PATH, __name__)


def type_probabilities(text: str) -> dict[str, float]:
    return classifier().probabilities(text)
