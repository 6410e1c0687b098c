"""The learned gates of the local analyzer: four calibrated logistic layers over one feature vector per post
(docs/analyzer-learning.md, "Learned gates"): safety (unsafe against everything else), spam (spam against ordinary
posts), stance (unsafe against safe-but-edgy posts only: the same topics, so what it learns is stance — offering
or threatening against warning, reporting, telling a story) and topic (unsafe and safe-but-edgy posts against
ordinary posts and spam: whether a post is about harm at all, whatever its stance).

Over the layers sits the safety decision: one more logistic layer (a Layer over DECISION_INPUTS, not the vector) — the
safety, topic and stance layers' estimates, the last two's product (the probability that a post is on a harmful
topic *and* takes the harmful side), the n-gram estimate, a defusing word, and which kinds of category rule fired. It
is fitted on out-of-fold layer estimates of the written-apart development sets and the analyzer's own posts
(pipeline.gate_training.fit_decision), so it learns how far to trust each layer and each rule on text its layers
have not seen.

The features, fixed by CONTRACT: the post's language-neutral e5 vector (pipeline.llm.local.e5: its meaning,
whatever the language and the wording) followed by SCALARS, the signals the rest of the analyzer computes and
the vector cannot see — the n-gram classifiers' estimates (words), whether a defusing word is present (a warning
about money mules against recruiting them), the structure of spam (bait named by the phrase lists, specifics a
reader can act on, a referral or affiliate code, one word repeated). A model file holds the weights of both layers
for exactly this contract; a file of another contract, or of another length, is refused.

The weights come from `manage.py train_analyzer` (pipeline.gate_training): the shipped labelled posts plus the
moderators' decisions. The shipped model is data/analyzer_gates.json; a model trained later lives in the database
(pipeline.models.AnalyzerModel) and the active one replaces the shipped one in every process within
ANALYZER_MODEL_RELOAD_SECONDS: the item-publish consumer asks pipeline.analyzer_models before each item and hands
the model to `serve`.
"""

from __future__ import annotations

import contextvars
import json
import logging
import math
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import regex

from eigenflux.base.longlived import loaded_once
from pipeline.llm.local import e5
from pipeline.llm.local.normalise import fold

log = logging.getLogger(__name__)
SHIPPED_PATH = Path(__file__).resolve().parent / "data" / "analyzer_gates.json"
CONTRACT = "gates_v3"
LAYERS = ("safety", "spam", "stance", "topic")
SCALARS = (
    "ngram_safety",  # logit of the n-gram safety classifier's estimate (safety_classifier.py)
    "ngram_spam",  # logit of the n-gram spam classifier's estimate (spam_classifier.py)
    "defused",  # a defusing word: reports, warns, prevents, researches, offers help (safety_rules.defused)
    "bait",  # the bait the phrase lists name, summed (quality.BAIT signals; <= 0)
    "specifics",  # what a reader can act on, summed (quality's positive signals; >= 0)
    "referral",  # a referral, invite or affiliate code
    "repetition",  # the share of the post's words that are its most repeated word (above two uses)
)
WIDTH = e5.DIMENSIONS + len(SCALARS)
RULE_KINDS = ("hard_rule", "pattern", "phrase", "combination", "term")  # safety_rules.RuleHit.kind
DECISION_INPUTS = (
    "safety",  # logit of the safety layer's estimate
    "harm",  # logit of topic x stance: on a harmful topic and on the harmful side of it
    "topic",  # logit of the topic layer's estimate
    "stance",  # logit of the stance layer's estimate
    "ngram_safety",  # logit of the n-gram safety classifier's estimate
    "defused",  # a defusing word
    *(f"rule_{kind}" for kind in RULE_KINDS),  # a category rule of that kind fired
)
_REFERRAL = regex.compile(
    r"(?:\b(?:ref(?:erral)?|invite|invitation|promo|affiliate|coupon)[ _-]?(?:code|link|id)\b|[?&](?:ref|aff|affid|"
    r"referrer|invite)=|\buse my (?:code|link)\b|邀请码|推荐码|优惠码|招待コード|紹介コード|クーポンコード)",
    regex.IGNORECASE,
)
_WORDS = regex.compile(r"[\p{L}\p{N}]{2,}|\p{Han}|[\p{Hiragana}\p{Katakana}]{2,}")


def logit(probability: float) -> float:
    probability = min(max(probability, 1e-4), 1.0 - 1e-4)
    return math.log(probability / (1.0 - probability))


def sigmoid(score: float) -> float:
    return 1.0 / (1.0 + math.exp(-max(min(score, 30.0), -30.0)))


def repetition(text: str) -> float:
    words = [word.lower() for word in _WORDS.findall(text)]
    if len(words) < 6:
        return 0.0
    top = Counter(words).most_common(1)[0][1]
    return top / len(words) if top > 2 else 0.0


def scalar_features(text: str, *, ngram_safety: float | None = None, ngram_spam: float | None = None) -> np.ndarray:
    """SCALARS for one post. The n-gram estimates may be given (training gives out-of-fold ones)."""
    from pipeline.llm.local import quality, safety_rules
    from pipeline.llm.local.safety_classifier import classifier as safety_classifier
    from pipeline.llm.local.spam_classifier import spam_probability

    if ngram_safety is None:
        ngram_safety = safety_classifier().risk(text)[0]
    if ngram_spam is None:
        ngram_spam = spam_probability(text)
    signals = quality.rule_signals(text)
    bait = sum(weight for name, weight in signals.items() if name in quality.BAIT)
    specifics = sum(weight for weight in signals.values() if weight > 0)
    return np.array(
        [
            logit(ngram_safety) / 4.0,
            logit(ngram_spam) / 4.0,
            float(safety_rules.defused(fold(text))),
            bait,
            specifics,
            float(bool(_REFERRAL.search(text))),
            repetition(text),
        ],
        dtype=np.float64,
    )


def feature_row(vector: np.ndarray, scalars: np.ndarray) -> np.ndarray:
    return np.concatenate([np.asarray(vector, dtype=np.float64), scalars])


def decision_inputs(
    safety: float, topic: float, stance: float, ngram_safety: float, defused: bool, kinds: set[str]
) -> np.ndarray:
    """DECISION_INPUTS for one post: the layers' probabilities, the n-gram estimate, and the rule kinds that fired
    (logits scaled by a quarter, as SCALARS are)."""
    return np.array(
        [
            logit(safety) / 4.0,
            logit(topic * stance) / 4.0,
            logit(topic) / 4.0,
            logit(stance) / 4.0,
            logit(ngram_safety) / 4.0,
            float(defused),
            *(float(kind in kinds) for kind in RULE_KINDS),
        ],
        dtype=np.float64,
    )


@dataclass(frozen=True)
class Layer:
    """One calibrated logistic layer: sigmoid(weights . features + bias) is its probability."""

    weights: np.ndarray
    bias: float

    def probability(self, row: np.ndarray) -> float:
        return sigmoid(float(row @ self.weights) + self.bias)

    def terms(self, row: np.ndarray) -> dict[str, float]:
        """Each scalar feature's share of the score, and the meaning vector's (explains a probability)."""
        shares = row * self.weights
        found = {"meaning": float(shares[: e5.DIMENSIONS].sum())}
        found.update({name: float(shares[e5.DIMENSIONS + index]) for index, name in enumerate(SCALARS)})
        return found


@dataclass(frozen=True)
class GateModel:
    safety: Layer
    spam: Layer
    version: str = "shipped"
    provenance: dict[str, Any] = field(default_factory=dict)
    stance: Layer | None = None  # None: no stance layer, nothing is cleared on stance (a model built in a test)
    topic: Layer | None = None
    # The safety decision, a Layer over DECISION_INPUTS: below SAFETY_LOCAL_DECISION_CLEARS it publishes a post the
    # rest would stop (safety.py). None (a model built in a test from its layers): nothing is cleared on it.
    decision: Layer | None = None

    def row(self, text: str, vector: np.ndarray | None = None) -> np.ndarray:
        if vector is None:
            vector = e5.vectors([text])[0]
        return feature_row(vector, scalar_features(text))

    def safety_probability(self, text: str) -> float:
        return self.safety.probability(self.row(text))

    def spam_probability(self, text: str) -> float:
        return self.spam.probability(self.row(text))


class ContractMismatch(ValueError):
    """A model file written for other features than this code computes."""


def to_document(model: GateModel) -> dict[str, Any]:
    return {
        "contract": CONTRACT,
        "scalars": list(SCALARS),
        "width": WIDTH,
        "version": model.version,
        "provenance": model.provenance,
        **{
            name: {"bias": round(layer.bias, 8), "weights": [round(float(value), 8) for value in layer.weights]}
            for name, layer in (
                ("safety", model.safety),
                ("spam", model.spam),
                ("stance", model.stance),
                ("topic", model.topic),
            )
            if layer is not None
        },
        **(
            {}
            if model.decision is None
            else {
                "decision": {
                    "inputs": list(DECISION_INPUTS),
                    "bias": round(model.decision.bias, 8),
                    "weights": [round(float(value), 8) for value in model.decision.weights],
                }
            }
        ),
    }


def from_document(document: dict[str, Any]) -> GateModel:
    """The model a document describes; ContractMismatch when it was written for other features."""
    if document.get("contract") != CONTRACT or list(document.get("scalars", [])) != list(SCALARS):
        raise ContractMismatch(
            f"model contract {document.get('contract')!r} with scalars {document.get('scalars')} does not match "
            f"this code's {CONTRACT!r} {list(SCALARS)}"
        )
    layers = {}
    for name in LAYERS:
        if name not in document:
            raise ContractMismatch(f"the model has no {name} layer; {CONTRACT} has {', '.join(LAYERS)}")
        weights = np.asarray(document[name]["weights"], dtype=np.float64)
        if weights.shape != (WIDTH,):
            raise ContractMismatch(f"the {name} layer has {weights.shape} weights; {CONTRACT} needs {WIDTH}")
        layers[name] = Layer(weights, float(document[name]["bias"]))
    decision = document.get("decision")
    if not isinstance(decision, dict) or list(decision.get("inputs", [])) != list(DECISION_INPUTS):
        raise ContractMismatch(f"the model's decision does not read {CONTRACT}'s inputs {list(DECISION_INPUTS)}")
    weights = np.asarray(decision["weights"], dtype=np.float64)
    if weights.shape != (len(DECISION_INPUTS),):
        raise ContractMismatch(f"the decision has {weights.shape} weights; {CONTRACT} needs {len(DECISION_INPUTS)}")
    return GateModel(
        layers["safety"],
        layers["spam"],
        str(document.get("version", "?")),
        dict(document.get("provenance", {})),
        layers["stance"],
        layers["topic"],
        Layer(weights, float(decision["bias"])),
    )


@loaded_once("reading the shipped analyzer gates")
def shipped() -> GateModel:
    """The model shipped in the repository (data/analyzer_gates.json)."""
    return from_document(json.loads(SHIPPED_PATH.read_text(encoding="utf-8")))


_serving: GateModel | None = None
_override: contextvars.ContextVar[GateModel | None] = contextvars.ContextVar("gates_override", default=None)


def serve(model: GateModel | None) -> None:
    """The model this process judges with from now on (None: the shipped one). The pipeline hands it the
    database's active model (pipeline.analyzer_models.active_gates); judging itself never reads the database."""
    global _serving
    _serving = model


def current() -> GateModel:
    """The model in effect: one set by `using`, else the one served, else the shipped one."""
    chosen = _override.get()
    if chosen is not None:
        return chosen
    return _serving if _serving is not None else shipped()


@contextmanager
def using(model: GateModel) -> Iterator[None]:
    """Judges with `model` in this context (evaluating a candidate before it is activated)."""
    token = _override.set(model)
    try:
        yield
    finally:
        _override.reset(token)
