"""The embedding layer of the local safety check: logistic regression over the text's MiniLM sentence vector.

The n-gram classifier (safety_classifier.py) learns the words of its training set; a new phrasing of the same
harm shares few of them. The sentence vector (pipeline.llm.local.embedding.minilm_vectors: the model's reading
of the text, or of its English gloss for Chinese and Japanese) places paraphrases near each other, so a linear
model over it carries what the training set says to wordings it never saw, in all three languages.

Embedding the ~570 training texts takes seconds, too long for start-up, so the model is trained offline by
`python -m bench.safety_set --write-embedding-model` from data/safety_train.jsonl (the labelled tuning half plus
ordinary posts; never the held-out half) and shipped as data/safety_embedding.json: 384 weights and a bias
(Platt-calibrated on out-of-fold scores, so the output reads as a probability), the four coefficients of the
blend with the n-gram classifier, and the SHA-256 of the training file and of the safety lexicon (whose
defusing words the blend reads) it was fitted to. A test fails when either no longer matches.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import regex

from pipeline.llm.local import embedding, minilm, safety_classifier, safety_rules
from pipeline.llm.local.ngram_fit import platt
from pipeline.llm.local.normalise import fold as fold_text
from pipeline.llm.local.safety_classifier import TRAINING_PATH

WEIGHTS_PATH = Path(__file__).resolve().parent / "data" / "safety_embedding.json"
EPOCHS = 3000
STEP = 2.0
L2 = 1e-3
FOLDS = 4
# A text needs this many distinct words (of two letters or more; each Chinese or Japanese character counts as a
# word) before the layer reads it: the model still places a string of one letter or of punctuation somewhere,
# often near the unsafe examples, and nothing in the training set looks like it.
MIN_WORDS = 4
_WORD = regex.compile(r"\p{L}{2,}")
_CJK = regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}]")
BLEND_EPOCHS = 3000
BLEND_STEP = 0.2


def readable(text: str) -> bool:
    """Whether the text has enough words for the layer to judge (MIN_WORDS)."""
    words = {word.lower() for word in _WORD.findall(_CJK.sub(" ", text))} | set(_CJK.findall(text))
    return len(words) >= MIN_WORDS


def training_sha256(path: Path = TRAINING_PATH) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def lexicon_sha256() -> str:
    """The safety lexicon's hash: its defusing words are a feature of the blend."""
    return hashlib.sha256(safety_rules.SAFETY_LEXICON_PATH.read_bytes()).hexdigest()


def _sigmoid(score: float) -> float:
    return 1.0 / (1.0 + math.exp(-max(min(score, 30.0), -30.0)))


def _logit(probability: float) -> float:
    probability = min(max(probability, 1e-4), 1.0 - 1e-4)
    return math.log(probability / (1.0 - probability))


@dataclass(frozen=True)
class EmbeddingSafetyModel:
    weights: np.ndarray
    bias: float
    # The learned blend: coefficients of logit(n-gram risk), logit(embedding risk), "defused" (0/1) and a bias.
    blend: tuple[float, float, float, float]

    def risk_of_vector(self, vector: np.ndarray) -> float:
        return _sigmoid(float(np.asarray(vector, dtype=np.float64) @ self.weights) + self.bias)

    def risk(self, text: str) -> float:
        """The estimated probability that the text is unsafe, from its sentence vector alone."""
        return self.risk_of_vector(embedding.minilm_vectors([text])[0])

    def combined(self, ngram_risk: float, embedding_risk: float, defused: bool) -> float:
        """Both learned estimates blended into one probability, as fitted on out-of-fold scores."""
        a, b, c, d = self.blend
        return _sigmoid(a * _logit(ngram_risk) + b * _logit(embedding_risk) + c * float(defused) + d)


def _fit(
    vectors: np.ndarray, target: np.ndarray, *, epochs: int = EPOCHS, step: float = STEP, l2: float = L2
) -> tuple[np.ndarray, float]:
    """Class-balanced, L2-regularised logistic regression by full-batch gradient descent (deterministic)."""
    positives = max(float(target.sum()), 1.0)
    negatives = max(float(len(target)) - positives, 1.0)
    sample_weight = np.where(target == 1.0, 0.5 / positives, 0.5 / negatives)
    weights, bias = np.zeros(vectors.shape[1]), 0.0
    for _ in range(epochs):
        error = sample_weight * (1.0 / (1.0 + np.exp(-(vectors @ weights + bias))) - target)
        weights -= step * (vectors.T @ error + l2 * weights)
        bias -= step * float(error.sum())
    return weights, bias


def train(cases: list[dict[str, Any]], vectors: np.ndarray) -> EmbeddingSafetyModel:
    """Fits the model on the cases' sentence vectors (unsafe against everything else), and the blend of its
    estimate with the n-gram classifier's on 4-fold out-of-fold estimates of both, so that the blend weighs
    each as it does on text it has not seen."""
    vectors = np.asarray(vectors, dtype=np.float64)
    target = np.array([case["label"] == "unsafe" for case in cases], dtype=np.float64)
    scores, ngram = np.zeros(len(target)), np.zeros(len(target))
    for fold in range(FOLDS):
        held = np.arange(fold, len(target), FOLDS)
        rest = np.setdiff1d(np.arange(len(target)), held)
        weights, bias = _fit(vectors[rest], target[rest])
        scores[held] = vectors[held] @ weights + bias
        fitted = safety_classifier.train([cases[row] for row in rest])
        ngram[held] = [_logit(fitted.risk(cases[row]["text"])[0]) for row in held]
    slope, intercept = platt(scores, target)
    weights, bias = _fit(vectors, target)
    defused = np.array([float(safety_rules.defused(fold_text(case["text"]))) for case in cases])
    features = np.column_stack([ngram, slope * scores + intercept, defused])
    blend_weights, blend_bias = _fit(features, target, epochs=BLEND_EPOCHS, step=BLEND_STEP, l2=0.0)
    blend = (*(float(value) for value in blend_weights), blend_bias)
    return EmbeddingSafetyModel(slope * weights, slope * bias + intercept, blend)  # type: ignore[arg-type]


def training_vectors(cases: list[dict[str, Any]]) -> np.ndarray:
    return embedding.minilm_vectors([case["text"] for case in cases])


def write_model(path: Path = WEIGHTS_PATH, training: Path = TRAINING_PATH) -> EmbeddingSafetyModel:
    """Trains on the shipped training file and writes the weights file (with the file's SHA-256)."""
    cases = [json.loads(line) for line in training.read_text(encoding="utf-8").splitlines() if line.strip()]
    fitted = train(cases, training_vectors(cases))
    document = {
        "model": "logistic regression over all-MiniLM-L6-v2 sentence vectors (pipeline.llm.local.safety_embedding)",
        "training_file": training.name,
        "training_sha256": training_sha256(training),
        "lexicon_sha256": lexicon_sha256(),
        "cases": len(cases),
        "bias": round(fitted.bias, 8),
        "blend": [round(value, 8) for value in fitted.blend],
        "weights": [round(float(value), 8) for value in fitted.weights],
    }
    path.write_text(json.dumps(document, indent=None) + "\n", encoding="utf-8")
    return fitted


@functools.cache
def model() -> EmbeddingSafetyModel:
    """The shipped model, read on first use. A missing or malformed file is an error, never a silent pass."""
    document = json.loads(WEIGHTS_PATH.read_text(encoding="utf-8"))
    weights = np.asarray(document["weights"], dtype=np.float64)
    if weights.shape != (minilm.DIMENSIONS,):
        raise ValueError(f"{WEIGHTS_PATH}: expected {minilm.DIMENSIONS} weights, found {weights.shape}")
    a, b, c, d = (float(value) for value in document["blend"])
    return EmbeddingSafetyModel(weights, float(document["bias"]), (a, b, c, d))
