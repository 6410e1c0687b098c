"""Training a ranker (`manage.py train_ranker`, docs/feed-ranker.md#training): the labelled impressions split by
day, a logistic regression fitted on the earlier days, measured on the later ones against what serves now (the
active model, or the formula), and stored with its provenance, self-tests and metrics. It becomes the active
model only if it beats or matches what serves now on the held-out days; otherwise it is stored as refused,
with the reason."""

from __future__ import annotations

import hashlib
import platform
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
from django.db import transaction
from django.utils import timezone

from items.feed_ranking.signals import weights as formula_weights
from items.models import RankerModel, RankerModelStatus
from items.ranker.contract import CONTRACT, FEATURES, SIGNAL_FEATURES
from items.ranker.dataset import TrainingSet, training_set
from items.ranker.fit import evaluate, fit_logistic
from items.ranker.model import ModelRefused, model_document, model_load
from items.ranker.serving import ranker_activate

GATED_METRICS = ("auc", "logged_ndcg")


class TrainingRefused(ValueError):
    """Not enough data to train or to judge a model (nothing is stored)."""


@dataclass(frozen=True)
class Trained:
    model: RankerModel
    activated: bool
    reason: str


def code_version() -> str:
    """A hash of the ranker's own code: the contract, the data's labels, the fit, the scorer and the training."""
    digest = hashlib.sha256()
    for name in ("contract.py", "dataset.py", "fit.py", "model.py", "training.py"):
        digest.update((Path(__file__).with_name(name)).read_bytes())
    return digest.hexdigest()[:16]


def split_by_day(data: TrainingSet, *, held_out_days: int) -> tuple[TrainingSet, TrainingSet]:
    """The earlier days to train on and the last `held_out_days` days (of those with data) to measure on."""
    days = np.unique(data.days)
    if len(days) <= held_out_days:
        raise TrainingRefused(f"impressions on {len(days)} day(s): at least {held_out_days + 1} are needed")
    held = data.days >= days[-held_out_days]
    train, test = data.subset(~held), data.subset(held)
    if len(np.unique(train.labels)) < 2 or not (test.labels == 1).any():
        raise TrainingRefused("the training days need positives and negatives, the held-out days positives")
    return train, test


def formula_scores(matrix: np.ndarray) -> np.ndarray:
    """The formula's score from the contract's vectors: its current weights times the raw signals."""
    current = formula_weights()
    columns = [FEATURES.index(name) for name in SIGNAL_FEATURES]
    return matrix[:, columns] @ np.array([current.get(name, 0.0) for name in SIGNAL_FEATURES])


def formula_prior(train: TrainingSet, *, l2: float) -> tuple[np.ndarray, float]:
    """The formula as a model of this contract: its weights on the signal features (0 on the others), times the
    scale a logistic regression of the labels on the formula's score gives it (at least 0). The model is fitted
    toward it: a model trained on a few days of pages the formula chose stays close to the formula instead of
    reading the formula's own choices as rules (an item served for its freshness and not followed up is no
    evidence against freshness elsewhere)."""
    current = formula_weights()
    direction = np.array([current.get(name, 0.0) if name in SIGNAL_FEATURES else 0.0 for name in FEATURES])
    (scale,), _ = fit_logistic(formula_scores(train.features)[:, None], train.labels, l2=l2)
    return max(0.0, float(scale)) * direction, max(0.0, float(scale))


def _baseline(test: TrainingSet) -> tuple[str, dict]:
    active = RankerModel.objects.filter(status=RankerModelStatus.ACTIVE).first()
    if active is not None:
        try:
            scores = model_load(active.document, model_id=active.pk).logits(test.features)
            return f"model {active.pk}", evaluate(scores, test.labels, test.pages, test.propensities)
        except ModelRefused:
            pass  # an active model that no longer loads serves nothing: the formula is what serves
    return "formula", evaluate(formula_scores(test.features), test.labels, test.pages, test.propensities)


def gate(candidate: dict, baseline: dict) -> str:
    """'' when the candidate beats or matches the baseline on every gated metric, else why not."""
    for name in GATED_METRICS:
        mine, theirs = candidate.get(name), baseline.get(name)
        if theirs is not None and (mine is None or mine < theirs - 1e-9):
            return f"{name} {mine if mine is None else round(mine, 4)} below {round(theirs, 4)}"
    return ""


def _provenance(train: TrainingSet, test: TrainingSet, ignored: int, options: dict) -> dict:
    return {
        "trained_at": timezone.now().isoformat(),
        "code_version": code_version(),
        "numpy": np.__version__,
        "python": platform.python_version(),
        "data_hash": hashlib.sha256((train.digest() + test.digest()).encode()).hexdigest()[:16],
        "train": _counts(train),
        "held_out": _counts(test),
        "ignored": ignored,
        **options,
    }


def _counts(data: TrainingSet) -> dict:
    return {
        "rows": len(data),
        "positives": int(data.labels.sum()),
        "readers": len(np.unique(data.readers)),
        "days": [str(data.days.min()), str(data.days.max())],
    }


def ranker_train(
    *,
    days: int,
    held_out_days: int,
    skips: int,
    l2: float,
    now: datetime | None = None,
    excluded_readers: frozenset[int] = frozenset(),
) -> Trained:
    now = now or timezone.now()
    data = training_set(since=now - timedelta(days=days), skips=skips, excluded_readers=excluded_readers)
    train, test = split_by_day(data, held_out_days=held_out_days)
    prior, scale = formula_prior(train, l2=l2)
    weights, intercept = fit_logistic(train.features, train.labels, l2=l2, prior=prior)
    candidate = evaluate(test.features @ weights + intercept, test.labels, test.pages, test.propensities)
    against, baseline = _baseline(test)
    refusal = gate(candidate, baseline)
    # With what the fit started from: the formula's weights then, and the scale the labels gave them.
    options: dict[str, object] = {"days": days, "held_out_days": held_out_days, "skips": skips, "l2": l2}
    options |= {"formula_scale": scale, "formula_weights": formula_weights()}
    document = model_document(
        weights,
        intercept,
        inputs=test.features[:3].tolist(),
        provenance=_provenance(train, test, data.ignored, options),
    )
    metrics = {"held_out": candidate, "baseline": {"ranking": against, **baseline}}
    with transaction.atomic():
        model = RankerModel.objects.create(
            contract=CONTRACT,
            document=document,
            metrics=metrics,
            status=RankerModelStatus.REFUSED if refusal else RankerModelStatus.STORED,
            reason=f"refused against {against}: {refusal}" if refusal else "",
        )
        if not refusal:
            ranker_activate(model=model, actor="train_ranker", reason=f"beats or matches {against}")
    return Trained(model=model, activated=not refusal, reason=model.reason)
