"""Logistic regression over hashed n-gram features, in numpy: what the local analyzer's learned layers share
(safety_classifier.py, spam_classifier.py, type_classifier.py).

Each text is a sparse row (indices into DIMENSIONS hashed features, and their weights); `design` stacks a
training set's rows, `fit` fits one binary model by full-batch gradient descent with class-balanced weights,
`calibrated_fit` also calibrates its scores on FOLDS-fold out-of-fold predictions (Platt scaling), so that a
probability means what it says on text the model has not seen. Everything is deterministic.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

DIMENSIONS = 1 << 16
# 400 full-batch steps: at 120 the safety model's fit had not converged (a probe set written apart from the
# training data, docs/benchmarks.md, blocked fewer of its unsafe posts).
EPOCHS = 400
STEP = 4.0
L2 = 1e-3
FOLDS = 4

Features = Callable[[str], tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class Design:
    """A training set's feature rows: (row, local column, value) triplets over the columns it uses."""

    rows: int
    data: tuple[np.ndarray, np.ndarray, np.ndarray]
    used: np.ndarray  # the hashed feature of each local column
    cols: tuple[np.ndarray, ...]  # each text's hashed features, and their values
    vals: tuple[np.ndarray, ...]

    def full(self, weights: np.ndarray) -> np.ndarray:
        """Local-column weights spread over all DIMENSIONS hashed features."""
        spread = np.zeros(DIMENSIONS)
        spread[self.used] = weights
        return spread


def design(texts: Sequence[str], features: Features) -> Design:
    cols, vals = zip(*(features(text) for text in texts), strict=True)
    row_of = np.concatenate([np.full(len(indices), row) for row, indices in enumerate(cols)])
    used, local_col = np.unique(np.concatenate(cols), return_inverse=True)
    return Design(len(texts), (row_of, local_col, np.concatenate(vals)), used, cols, vals)


def fit(
    data: tuple[np.ndarray, np.ndarray, np.ndarray],
    target: np.ndarray,
    rows: np.ndarray,
    groups: np.ndarray | None = None,
) -> tuple[np.ndarray, float]:
    """Logistic regression on the given rows of the (row, column, value) data, by full-batch gradient descent
    with class-balanced weights (balanced within each group too, when `groups` is given: balanced_weights);
    returns the weight of every column and the bias."""
    row_of, col_of, value = data
    count, columns = len(target), int(col_of.max()) + 1
    keep = np.isin(row_of, rows)
    row_of, col_of, value = row_of[keep], col_of[keep], value[keep]
    chosen = np.zeros(count, dtype=bool)
    chosen[rows] = True
    sample_weight = balanced_weights(target, chosen, groups)
    weights, bias = np.zeros(columns), 0.0
    for _ in range(EPOCHS):
        score = np.bincount(row_of, weights=value * weights[col_of], minlength=count) + bias
        error = sample_weight * (1.0 / (1.0 + np.exp(-score)) - target)
        weights -= STEP * (np.bincount(col_of, weights=value * error[row_of], minlength=columns) + L2 * weights)
        bias -= STEP * float(error.sum())
    return weights, bias


def balanced_weights(target: np.ndarray, chosen: np.ndarray, groups: np.ndarray | None = None) -> np.ndarray:
    """Each chosen row's weight: each class sums to one half. With `groups` (a language per row), a group's rows
    of either class weigh in proportion to the group's share of all chosen rows, so that neither class borrows a
    language's features: with global balancing alone, ordinary Chinese and Japanese posts added to the training
    file thinned the ordinary English posts' weight and English commerce read as unsafe (docs/benchmarks.md,
    "A seventh pass"). Without `groups` every row is of one group: the classes are balanced globally."""
    groups = np.zeros(len(target)) if groups is None else groups
    weight = np.zeros(len(target))
    for group in np.unique(groups[chosen]):
        in_group = chosen & (groups == group)
        for label in (0.0, 1.0):
            rows = in_group & (target == label)
            if rows.any():
                weight[rows] = float(in_group.sum()) / float(rows.sum())
    for label in (0.0, 1.0):
        in_class = chosen & (target == label)
        total = float(weight[in_class].sum())
        if total:
            weight[in_class] *= 0.5 / total
    return weight


def platt(scores: np.ndarray, target: np.ndarray) -> tuple[float, float]:
    """Slope and intercept that turn out-of-fold scores into calibrated probabilities (Platt scaling)."""
    slope, intercept = 1.0, 0.0
    for _ in range(2000):
        error = 1.0 / (1.0 + np.exp(-(slope * scores + intercept))) - target
        slope -= 0.5 * float(error @ scores) / len(scores)
        intercept -= 0.5 * float(error.sum()) / len(scores)
    return slope, intercept


def calibrated_fit(rows: Design, target: np.ndarray, groups: np.ndarray | None = None) -> tuple[np.ndarray, float]:
    """The model fitted on every row, its scores calibrated on out-of-fold predictions: the weight of every
    hashed feature (DIMENSIONS) and the bias, already scaled so that sigmoid(score) is the probability. `groups`:
    see `fit`."""
    row_of, local_col, value = rows.data
    everything = np.arange(rows.rows)
    out_of_fold = np.zeros(rows.rows)
    for fold_index in range(FOLDS):
        held = np.arange(fold_index, rows.rows, FOLDS)
        weights, bias = fit(rows.data, target, np.setdiff1d(everything, held), groups)
        keep = np.isin(row_of, held)
        scores = np.bincount(row_of[keep], weights=value[keep] * weights[local_col[keep]], minlength=rows.rows)
        out_of_fold[held] = scores[held] + bias
    slope, intercept = platt(out_of_fold, target)
    weights, bias = fit(rows.data, target, everything, groups)
    return rows.full(slope * weights), slope * bias + intercept
