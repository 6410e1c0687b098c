"""Which learned gates serve, and how a new model comes to serve (docs/model-layer.md, "Learned gates").

- `active_gates()`: the gates in effect in this process, handed to the local analyzer (gates.serve): the database's
  active AnalyzerModel, re-read at most every
  ANALYZER_MODEL_RELOAD_SECONDS (a model activated on one machine serves on every machine without a restart), or
  the shipped model when none is active. A stored model this code cannot read (another feature contract, a
  damaged document) is refused: the shipped model serves, the error is logged and counted
  (eigenflux_analyzer_model_fallbacks_total{reason}).
- `train_and_gate()`: `manage.py train_analyzer`: trains on the shipped examples and the moderators' decisions,
  evaluates the candidate and the active model on the held-out sets, and activates the candidate only when it is
  not worse on any of them by more than TOLERANCE; a refused model is kept, with the reason, for the admin.
- `activate()`: a superuser's roll-back (or forward) from the admin.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from django.conf import settings
from django.db import DatabaseError, transaction
from django.utils import timezone
from prometheus_client import Counter

from pipeline import gate_training
from pipeline.llm.local import gates
from pipeline.models import AnalyzerModel, AnalyzerModelState

log = logging.getLogger(__name__)
# A candidate may lose this many held-out posts on any figure and still activate: the figures are shares of a few
# dozen to a hundred posts each, and a moderator's correction may cost one borderline held-out post.
TOLERANCE_POSTS = 1
FALLBACKS = Counter(
    "eigenflux_analyzer_model_fallbacks_total",
    "Times a process served the shipped gates because the active analyzer model could not be used.",
    ["reason"],
)
_lock = threading.Lock()
_state: dict[str, Any] = {"checked": 0.0, "id": None, "model": None}


def _load_active() -> tuple[int | None, gates.GateModel | None]:
    row = AnalyzerModel.objects.filter(state=AnalyzerModelState.ACTIVE).values_list("pk", "document").first()
    if row is None:
        return None, None
    pk, document = row
    if _state["id"] == pk and _state["model"] is not None:
        return pk, _state["model"]
    try:
        return pk, gates.from_document(document)
    except (gates.ContractMismatch, KeyError, TypeError, ValueError) as exc:
        FALLBACKS.labels(reason="contract").inc()
        log.error("analyzer model %s refused, serving the shipped gates: %s", pk, exc)
        return pk, None


def active_gates() -> gates.GateModel:
    """The gates in effect (see the module docstring)."""
    now = time.monotonic()
    with _lock:
        if now - float(_state["checked"]) >= settings.ANALYZER_MODEL_RELOAD_SECONDS:
            try:
                pk, model = _load_active()
            except DatabaseError as exc:
                FALLBACKS.labels(reason="database").inc()
                log.warning("analyzer model: could not read the active model (%s); keeping the one in use", exc)
                pk, model = _state["id"], _state["model"]
            _state.update(checked=now, id=pk, model=model)
            gates.serve(model)
        model = _state["model"]
    return model if isinstance(model, gates.GateModel) else gates.shipped()


def forget_active() -> None:
    """The next `active_gates()` reads the database again (after an activation in this process)."""
    with _lock:
        _state.update(checked=0.0, id=None, model=None)
    gates.serve(None)


def _verdict(candidate: dict, active: dict) -> tuple[bool, str]:
    """Whether the candidate's held-out figures are each within TOLERANCE_POSTS posts of the active model's."""
    counts = candidate.get("counts", {})
    worse = [
        f"{name} {candidate.get(name, 0.0):.3f} < {value:.3f}"
        for name, value in active.items()
        if isinstance(value, float)
        # In posts, not shares: the figures are rounded to four places, so one post of 63 lost reads 0.9841, a
        # hair under 1 - 1/63, and the comparison of shares refused it.
        and round((value - candidate.get(name, 0.0)) * max(counts.get(name, 1), 1)) > TOLERANCE_POSTS
    ]
    if worse:
        return False, "refused: worse than the active model on the held-out sets: " + "; ".join(worse)
    return True, f"activated: within {TOLERANCE_POSTS} held-out post of the active model on every figure"


def train_and_gate(*, actor: str = "train_analyzer", force: bool = False) -> AnalyzerModel:
    """Trains a candidate, compares it with the model in effect and activates it when it is not worse."""
    from pipeline.moderator_labels import moderator_examples

    examples = gate_training.shipped_examples() + moderator_examples()
    version = timezone.now().strftime("%Y%m%dT%H%M%S")
    candidate = gate_training.train(examples, version)
    forget_active()
    active = active_gates()
    metrics, compared = gate_training.evaluate(candidate), gate_training.evaluate(active)
    ok, note = _verdict(metrics, compared)
    if force and not ok:
        ok, note = True, f"activated by --force ({note})"
    row = AnalyzerModel.objects.create(
        contract=gates.CONTRACT,
        document=gates.to_document(candidate),
        metrics=metrics,
        compared_with={"version": active.version, **compared},
        moderator_labels=int(candidate.provenance["moderator_labels"]),
        note=note,
        state=AnalyzerModelState.CANDIDATE if ok else AnalyzerModelState.REFUSED,
    )
    if ok:
        activate(row, actor=actor)
    return row


def activate(row: AnalyzerModel, *, actor: str) -> None:
    """Makes `row` the active model (the previous one is retired); serves everywhere within the reload period."""
    gates.from_document(row.document)  # refuses a document this code cannot read before anything changes
    with transaction.atomic():
        AnalyzerModel.objects.filter(state=AnalyzerModelState.ACTIVE).exclude(pk=row.pk).update(
            state=AnalyzerModelState.RETIRED
        )
        row.state, row.activated_at, row.activated_by = AnalyzerModelState.ACTIVE, timezone.now(), actor
        row.save(update_fields=["state", "activated_at", "activated_by"])
    forget_active()
    log.info("analyzer model %s activated by %s", row.pk, actor)


def deactivate_all(*, actor: str) -> int:
    """Back to the shipped model: every active model is retired."""
    retired = AnalyzerModel.objects.filter(state=AnalyzerModelState.ACTIVE).update(state=AnalyzerModelState.RETIRED)
    forget_active()
    log.info("analyzer models retired by %s; the shipped gates serve", actor)
    return retired
