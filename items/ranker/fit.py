"""Fitting and measuring the ranker offline (docs/feed-ranker.md#training): an L2-regularised logistic
regression fitted by Newton's method in numpy, and the held-out metrics the gate compares (AUC, logged nDCG, a
self-normalised inverse-propensity estimate). numpy rather than scikit-learn: the problem is a few thousand rows
of 21 columns, Newton's method converges to the same optimum in a handful of steps, deterministically, and the
serving side is numpy anyway (no new dependency in every web process)."""

from __future__ import annotations

from collections import defaultdict

import numpy as np

NEWTON_STEPS = 50


def fit_logistic(
    matrix: np.ndarray, labels: np.ndarray, *, l2: float = 1.0, prior: np.ndarray | None = None
) -> tuple[np.ndarray, float]:
    """(weights, intercept) minimising the log-loss plus l2/2 * |weights - prior|^2 (the intercept unpenalised; the
    prior is zero unless given): with little data the weights stay near the prior, with more they follow the data.
    Newton's method from zero, each step halved until the objective does not rise (a full step from far away can
    overshoot where the probabilities saturate)."""
    rows, width = matrix.shape
    design = np.concatenate([matrix, np.ones((rows, 1))], axis=1)
    penalty = np.full(width + 1, l2)
    penalty[-1] = 0.0
    centre = np.zeros(width + 1)
    if prior is not None:
        centre[:-1] = prior

    def objective(theta: np.ndarray) -> float:
        logits = design @ theta
        return float(np.logaddexp(0.0, logits).sum() - labels @ logits + 0.5 * penalty @ (theta - centre) ** 2)

    theta = np.zeros(width + 1)
    current = objective(theta)
    for _ in range(NEWTON_STEPS):
        probability = 1.0 / (1.0 + np.exp(-np.clip(design @ theta, -30, 30)))
        gradient = design.T @ (probability - labels) + penalty * (theta - centre)
        curvature = design.T @ (design * (probability * (1 - probability))[:, None]) + np.diag(penalty + 1e-9)
        step = np.linalg.solve(curvature, gradient)
        size = 1.0
        while objective(theta - size * step) > current + 1e-12 * max(1.0, abs(current)):
            size /= 2
            if size < 1e-6:
                return theta[:-1], float(theta[-1])  # no step lowers the objective: this is its minimum
        theta -= size * step
        current = objective(theta)
        if np.abs(size * step).max() < 1e-10:
            break
    return theta[:-1], float(theta[-1])


def auc(scores: np.ndarray, labels: np.ndarray) -> float | None:
    """The probability a positive outscores a negative (ties count half); None without both classes."""
    positives, negatives = scores[labels == 1], scores[labels == 0]
    if not len(positives) or not len(negatives):
        return None
    order = np.argsort(np.concatenate([positives, negatives]), kind="mergesort")
    ranks = np.empty(len(order))
    values = np.concatenate([positives, negatives])[order]
    position = 0
    while position < len(values):  # average ranks over ties
        end = position
        while end + 1 < len(values) and values[end + 1] == values[position]:
            end += 1
        ranks[order[position : end + 1]] = (position + end) / 2 + 1
        position = end + 1
    wins = ranks[: len(positives)].sum() - len(positives) * (len(positives) + 1) / 2
    return float(wins / (len(positives) * len(negatives)))


def _groups(pages: np.ndarray) -> dict:
    by_page: dict = defaultdict(list)
    for index, page in enumerate(pages.tolist()):
        by_page[page].append(index)
    return by_page


def logged_ndcg(scores: np.ndarray, labels: np.ndarray, pages: np.ndarray, *, at: int = 10) -> float | None:
    """Mean nDCG@at over the logged pages with at least one positive, each page's labelled items reordered by
    `scores` (the ranking asked about can only reorder what was served)."""
    values = []
    for indices in _groups(pages).values():
        gains = labels[indices].astype(float)
        if gains.sum() <= 0:
            continue
        order = np.argsort(-scores[indices], kind="mergesort")[:at]
        discounts = 1.0 / np.log2(np.arange(2, len(order) + 2))
        ideal = np.sort(gains)[::-1][:at]
        values.append(float((gains[order] * discounts).sum() / (ideal * discounts[: len(ideal)]).sum()))
    return float(np.mean(values)) if values else None


def ips_estimate(scores: np.ndarray, labels: np.ndarray, pages: np.ndarray, propensities: np.ndarray) -> float | None:
    """Self-normalised inverse-propensity estimate of the positive rate of the item the ranking would put first
    on each logged page: each labelled impression weighted by the ranking's softmax probability for it among its
    page's labelled items over the probability its logging policy had of showing it (1 for a ranked place,
    1 / pool for an exploration draw)."""
    numerator = denominator = 0.0
    for indices in _groups(pages).values():
        logits = scores[indices] - scores[indices].max()
        choice = np.exp(logits) / np.exp(logits).sum()
        weight = choice / np.clip(propensities[indices], 1e-3, 1.0)
        numerator += float((weight * labels[indices]).sum())
        denominator += float(weight.sum())
    return numerator / denominator if denominator else None


def evaluate(scores: np.ndarray, labels: np.ndarray, pages: np.ndarray, propensities: np.ndarray) -> dict:
    return {
        "auc": auc(scores, labels),
        "logged_ndcg": logged_ndcg(scores, labels, pages),
        "ips": ips_estimate(scores, labels, pages, propensities),
    }
