"""The ranker in the feed (docs/feed-ranker.md#serving): each process keeps the active model it loaded, asks
which model is active at most every FEED_RANKER_CHECK_SECONDS (a newly activated one is picked up without a
restart), loads it through its checks, and falls back to the formula, counted by reason, when it does not
load. A reader with no history is ranked by the formula (the cold start)."""

from __future__ import annotations

import dataclasses
import logging
import threading
import time

import numpy as np
from django.conf import settings
from django.db import transaction
from django.utils import timezone
from prometheus_client import Counter

from items.models import RankerModel, RankerModelStatus
from items.ranker.model import LoadedModel, ModelRefused, model_load

log = logging.getLogger(__name__)

FALLBACKS = Counter(
    "eigenflux_feed_ranker_fallbacks_total",
    "Rankings served by the formula although a ranker model is active, by why the model was refused.",
    ["reason"],
)


@dataclasses.dataclass
class _Cache:
    checked: float = -1e18
    active_id: int | None = None
    model: LoadedModel | None = None
    refused: str = ""  # the reason the active model was refused, "" when it loaded (or none is active)


_cache = _Cache()
_lock = threading.Lock()


def _load(active_id: int | None) -> None:
    _cache.active_id, _cache.model, _cache.refused = active_id, None, ""
    if active_id is None:
        return
    document = RankerModel.objects.filter(pk=active_id).values_list("document", flat=True).first()
    try:
        _cache.model = model_load(document or {}, model_id=active_id)
    except ModelRefused as exc:
        _cache.refused = exc.reason
        log.error("ranker model %s refused (%s): %s; the feed ranks by the formula", active_id, exc.reason, exc)


def active_model() -> LoadedModel | None:
    """The active model, loaded and checked; None when none is active or it was refused (a fallback, counted)."""
    with _lock:
        now = time.monotonic()
        if now - _cache.checked >= settings.FEED_RANKER_CHECK_SECONDS:
            _cache.checked = now
            active = RankerModel.objects.filter(status=RankerModelStatus.ACTIVE).values_list("pk", flat=True).first()
            if active != _cache.active_id:
                _load(active)
        model, refused = _cache.model, _cache.refused
    if refused:
        FALLBACKS.labels(reason=refused).inc()
    return model


def ranker_cache_clear() -> None:
    """Forget the loaded model and ask again at the next ranking (tests; a process after a fork)."""
    with _lock:
        _cache.checked, _cache.active_id, _cache.model, _cache.refused = -1e18, None, None, ""


def ranker_apply(scored: list, matrix: np.ndarray, *, reader_history: bool) -> list:
    """The formula's entries (with their feature vectors, `matrix`), as they are; with an active model and a
    reader with history (or any reader, with FEED_RANKER_FOR_NEWCOMERS), the formula's best FEED_RANKER_DEPTH
    re-ranked by the model (its logit is their total), the others after them in the formula's order, all marked
    with the model's ranking version. The model learned from what was served, which the formula's best resemble;
    far below them it would judge items unlike any it saw."""
    ranks_reader = reader_history or settings.FEED_RANKER_FOR_NEWCOMERS
    model = active_model() if scored and ranks_reader and settings.FEED_RANKER_ENABLED else None
    if model is None:
        return scored
    version = f"{settings.FEED_RANKING_VERSION}+ranker-{model.model_id}"
    totals = _reranked(scored, model.logits(matrix), settings.FEED_RANKER_DEPTH)
    return [
        dataclasses.replace(entry, total=total, ranker=version) for entry, total in zip(scored, totals, strict=True)
    ]


def _reranked(scored: list, logits: np.ndarray, depth: int) -> list[float]:
    """Each entry's total: its logit within the formula's best `depth` (in the page order's sense: by total, then
    newest), below the lowest of them by one and a thousandth per place in the formula's order for the rest."""
    order = sorted(range(len(scored)), key=lambda n: (-scored[n].total, -scored[n].facts.item_id))
    totals = [0.0] * len(scored)
    top = order[:depth]
    for index in top:
        totals[index] = float(logits[index])
    floor = min(totals[index] for index in top) - 1.0
    for place, index in enumerate(order[depth:]):
        totals[index] = floor - place / 1000
    return totals


def ranker_activate(*, model: RankerModel, actor: str, reason: str = "") -> RankerModel:
    """Make `model` the active one (the previous one retired), if it loads and passes its self-tests: after the
    gate in training, or a rollback by a superuser in the admin. Raises ModelRefused otherwise."""
    model_load(model.document, model_id=model.pk)
    if model.status == RankerModelStatus.REFUSED:
        raise ModelRefused("gate", f"model {model.pk} was refused by the gate: {model.reason}")
    with transaction.atomic():
        RankerModel.objects.filter(status=RankerModelStatus.ACTIVE).exclude(pk=model.pk).update(
            status=RankerModelStatus.RETIRED
        )
        note = f"activated by {actor}" + (f": {reason}" if reason else "")
        RankerModel.objects.filter(pk=model.pk).update(
            status=RankerModelStatus.ACTIVE, activated_at=timezone.now(), reason=note
        )
    model.refresh_from_db()
    return model


def ranker_problem() -> str:
    """What the health page says of the learned ranker: '' when no model is active or the active one loads,
    else which model is refused and why (every process runs the same checks, so this holds for each of them)."""
    active = RankerModel.objects.filter(status=RankerModelStatus.ACTIVE).values_list("pk", "document").first()
    if active is None:
        return ""
    try:
        model_load(active[1], model_id=active[0])
    except ModelRefused as exc:
        return f"ranker model {active[0]} refused ({exc.reason}: {exc}); the feeds rank by the formula"
    return ""


def model_terms(features: list[float] | None, ranker: str, *, top: int = 4) -> list[tuple[str, float]]:
    """ "Why this item" in the model's terms: the largest contributions of its features to the logit of the
    model that ranked it (by `ranker`, its ranking version); empty for an item the formula ranked."""
    model = _cache.model
    if not ranker or features is None or model is None or not ranker.endswith(f"+ranker-{model.model_id}"):
        return []
    parts = sorted(model.parts(np.asarray(features, dtype=float)).items(), key=lambda pair: -abs(pair[1]))
    return [(name, round(value, 2)) for name, value in parts[:top]]
