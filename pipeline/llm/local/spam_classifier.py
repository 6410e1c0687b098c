"""The learned layer of the local spam judgment: logistic regression over the safety classifier's hashed
character n-grams, in numpy.

The quality signals (pipeline.llm.local.quality) name bait by its phrases ("DM me", "details later", 稳赚);
a phrase list misses the many other ways of saying the same nothing. This model reads the whole post: trained on
first use (then kept on disk, model_cache.py), from data/spam_train.jsonl (the tuning half of the labelled spam set,
the training-only spam and ordinary posts of bench/data/spam_train_extra.jsonl, and the search corpus's ordinary
broadcasts; written by `python -m bench.content_sets --write-train`), class-balanced and calibrated on 4-fold
out-of-fold scores, so its probability means what it says on a post it has not seen. Its verdict is one signal
among the others (`learned_bait`), so a post with specifics still passes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from eigenflux.base.longlived import loaded_once
from pipeline.llm.local.ngram_fit import calibrated_fit, design
from pipeline.llm.local.safety_classifier import features, trained_on

TRAINING_PATH = Path(__file__).resolve().parent / "data" / "spam_train.jsonl"


@dataclass(frozen=True)
class SpamClassifier:
    weights: np.ndarray
    bias: float

    def probability(self, text: str) -> float:
        """The estimated probability that the post is spam (bait with nothing a reader can act on)."""
        indices, values = features(text)
        score = float(self.weights[indices] @ values) + self.bias
        return 1.0 / (1.0 + math.exp(-max(min(score, 30.0), -30.0)))


def train(cases: list[dict[str, str]]) -> SpamClassifier:
    """Fits the model on labelled cases ({"text", "label": spam|normal}), deterministically, calibrated on
    out-of-fold predictions."""
    target = np.array([case["label"] == "spam" for case in cases], dtype=np.float64)
    return SpamClassifier(*calibrated_fit(design([case["text"] for case in cases], features), target))


@loaded_once("training the learned spam model")
def classifier() -> SpamClassifier:
    """The process's model, trained from the shipped training file on first use, or read from the model cache."""
    return trained_on("spam", SpamClassifier, train, TRAINING_PATH, __name__)


def spam_probability(text: str) -> float:
    """The process model's probability that one post is spam."""
    return classifier().probability(text)
