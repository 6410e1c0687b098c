"""A ranker model file (docs/feed-ranker.md#the-model-file) and its loader: a logistic regression over the
contract's vector, scored with numpy. The loader refuses a document whose contract, shape or self-tests do not
match this code, with the reason; nothing is fitted here (items.ranker.fit, from manage.py train_ranker)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from items.ranker.contract import CONTRACT, FEATURES, WIDTH, fingerprint

FORMAT = 1
SELF_TEST_TOLERANCE = 1e-6


class ModelRefused(ValueError):
    """A model document this code will not serve with; `reason` is a short label for the fallback metric."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class LoadedModel:
    """A model that passed its checks: weights per contract feature, and an intercept."""

    model_id: int | None
    weights: np.ndarray
    intercept: float

    def logits(self, matrix: np.ndarray) -> np.ndarray:
        return np.asarray(matrix, dtype=float) @ self.weights + self.intercept

    def parts(self, vector: np.ndarray) -> dict[str, float]:
        """Each feature's contribution to one item's logit (the "why this item" in the model's terms)."""
        return {name: float(w * x) for name, w, x in zip(FEATURES, self.weights, vector, strict=True) if w * x}


def sigmoid(value: float) -> float:
    return 1.0 / (1.0 + math.exp(-value)) if value >= 0 else math.exp(value) / (1.0 + math.exp(value))


def self_tests(weights: np.ndarray, intercept: float, inputs: list[list[float]]) -> list[dict]:
    """Fixed inputs with the logit and probability this model gives them, written into its file at training."""
    cases = []
    for vector in inputs:
        logit = float(np.asarray(vector, dtype=float) @ weights + intercept)
        cases.append({"features": [float(x) for x in vector], "logit": logit, "probability": sigmoid(logit)})
    return cases


def model_document(weights: np.ndarray, intercept: float, *, inputs: list[list[float]], provenance: dict) -> dict:
    """The model file of these weights under the current contract, with self-tests on `inputs` (the zero and the
    one vector are always among them)."""
    return {
        "format": FORMAT,
        "contract": CONTRACT,
        "contract_fingerprint": fingerprint(),
        "features": list(FEATURES),
        "weights": [float(w) for w in weights],
        "intercept": float(intercept),
        "self_tests": self_tests(weights, intercept, [[0.0] * WIDTH, [1.0] * WIDTH, *inputs]),
        "provenance": provenance,
    }


def _check_shape(document: dict) -> tuple[np.ndarray, float]:
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise ModelRefused("format", f"model file format {document.get('format')!r}, this code reads {FORMAT}")
    contract = document.get("contract")
    if contract != CONTRACT or document.get("contract_fingerprint") != fingerprint():
        raise ModelRefused("contract", f"model contract {contract!r} does not match this code's {CONTRACT!r}")
    if list(document.get("features") or []) != list(FEATURES):
        raise ModelRefused("contract", f"model features differ from {CONTRACT}'s {WIDTH}")
    try:
        weights = np.array([float(w) for w in document["weights"]], dtype=float)
        intercept = float(document["intercept"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ModelRefused("shape", f"model weights unreadable: {exc}") from exc
    if weights.shape != (WIDTH,) or not np.isfinite(weights).all() or not math.isfinite(intercept):
        raise ModelRefused("shape", f"model has {weights.size} weights (or non-finite ones), the contract {WIDTH}")
    return weights, intercept


def model_load(document: dict, *, model_id: int | None = None) -> LoadedModel:
    """The model of a document, once its contract matches and every self-test gives its expected logit and
    probability; otherwise ModelRefused. A file with no self-tests is refused too: nothing would check it."""
    weights, intercept = _check_shape(document)
    cases = document.get("self_tests") or []
    if not cases:
        raise ModelRefused("self_test", "model has no self-tests")
    for number, case in enumerate(cases, 1):
        try:
            vector = np.array(case["features"], dtype=float)
            expected_logit, expected_probability = float(case["logit"]), float(case["probability"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ModelRefused("self_test", f"self-test {number} unreadable: {exc}") from exc
        if vector.shape != (WIDTH,):
            raise ModelRefused("self_test", f"self-test {number} has {vector.size} features, the contract {WIDTH}")
        logit = float(vector @ weights + intercept)
        if abs(logit - expected_logit) > SELF_TEST_TOLERANCE or (
            abs(sigmoid(logit) - expected_probability) > SELF_TEST_TOLERANCE
        ):
            raise ModelRefused(
                "self_test",
                f"self-test {number}: logit {logit:.6f}, expected {expected_logit:.6f} "
                f"(probability {sigmoid(logit):.6f}, expected {expected_probability:.6f})",
            )
    return LoadedModel(model_id=model_id, weights=weights, intercept=intercept)
