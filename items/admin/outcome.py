"""The Outcome section of an item's page (docs/admin.md#items): what the step that decided the item's status says,
for every status. The item's own fields hold only part of it (a discard at the safety gate writes no analyzer; a
blacklist discard runs no model), so each value is taken from the deciding step's decision where the row has none.
A field with nothing to say is left off the page rather than shown as "-"."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.contrib import admin
from django.utils.html import format_html

from items.admin.actions import EmptyFieldsHidden, badge
from items.api.presenters import WAITING, waiting_reason
from items.models import DecisionStage, ItemStatus, ModerationDecision, ProcessedItem

# A step's verdict that lets the item go on (or only waits): it decides no status.
GOING_ON = frozenset({"pass", "uncertain", "hold", "requeued"})
SAFETY_VERDICTS = frozenset({"pass", "uncertain", "unsafe"})
UNDECIDED = (ItemStatus.PENDING, ItemStatus.PROCESSING)
# Why an item waits for a moderator, in words (the `held` decision's category); its reason gives the figures.
HELD_BECAUSE = {
    "safety_risk": "safety uncertain",
    "borderline_quality": "borderline quality",
    "unsure_discard": "unsure spam discard",
    "reader_reports": "readers reported it",
}
SAFETY_TONES = {"pass": "ok", "uncertain": "warn", "unsafe": "bad"}


@dataclass(frozen=True)
class Outcome:
    """The deciding step (None while the pipeline has not decided) and what it, or the steps before it, found."""

    decision: ModerationDecision | None
    analyzer: str
    safety: ModerationDecision | None
    safety_verdict: str
    safety_risk: float | None
    held_because: str


def item_outcome(item: ProcessedItem, decisions: Sequence[ModerationDecision]) -> Outcome:
    """`decisions`: the item's history, oldest first."""
    run = [d for d in decisions if d.run == item.run] or list(decisions)
    deciding = None
    if item.status not in UNDECIDED:
        deciding = next((d for d in reversed(run) if d.verdict not in GOING_ON), run[-1] if run else None)
    safety = next(
        (d for d in reversed(decisions) if d.stage == DecisionStage.SAFETY and d.verdict in SAFETY_VERDICTS), None
    )
    held = deciding if deciding is not None and deciding.verdict == "held" else None
    verdict = safety.verdict if safety is not None else ""
    if verdict == "pass" and held is not None and held.category == "safety_risk":
        verdict = "uncertain"  # recorded as a pass before the history said so: the risk held the item
    models = [d.model for d in reversed(run) if d.model]
    analyzer = (deciding.model if deciding is not None else "") or item.analyzer or (models[0] if models else "")
    because = ""
    if held is not None:
        words = HELD_BECAUSE.get(held.category, held.category)
        because = f"{words}: {held.reason}" if held.reason else words
    return Outcome(
        decision=deciding,
        analyzer=analyzer,
        safety=safety,
        safety_verdict=verdict,
        safety_risk=item.safety_risk if safety is not None else None,
        held_because=because,
    )


class OutcomeFields(EmptyFieldsHidden):
    """The Outcome section's fields for ProcessedItemAdmin (and, with them, no field without a value)."""

    outcome_fields = (
        "decided_by",
        "waiting_because",
        "analyzer_used",
        "safety_verdict",
        "safety_flag",
        "safety_risk_read",
        "held_because",
    )

    def outcome_of(self, obj: ProcessedItem) -> Outcome:
        """Read once per page: every Outcome field, and the check for empty ones, asks for it."""
        cached = getattr(obj, "_ef_outcome", None)
        if cached is None:
            decisions = list(obj.decisions.select_related("moderator").order_by("created_at", "pk"))
            cached = item_outcome(obj, decisions)
            setattr(obj, "_ef_outcome", cached)  # noqa: B010 - an attribute the model does not declare
        return cached

    @admin.display(description="decided by")
    def decided_by(self, obj):
        """The step that decided the status: its stage, verdict, category and reason, and who (not the pipeline)."""
        step = self.outcome_of(obj).decision
        if step is None:
            return "not decided yet: the pipeline is still working on it" if obj.status in UNDECIDED else ""
        who = step.moderator.get_username() if step.moderator else step.actor
        reason = "" if self.outcome_of(obj).held_because else step.reason  # a hold's reason is in its own row
        return format_html(
            "{} {}{}{}{}",
            badge(step.stage, step.stage, "muted"),
            step.verdict,
            f" ({step.category})" if step.category else "",
            f": {reason}" if reason else "",
            f", by {who}" if who != "pipeline" else "",
        )

    @admin.display(description="analyzer")
    def analyzer_used(self, obj):
        return self.outcome_of(obj).analyzer

    @admin.display(description="safety verdict")
    def safety_verdict(self, obj):
        outcome = self.outcome_of(obj)
        if not outcome.safety_verdict:
            return ""
        model = outcome.safety.model if outcome.safety is not None else ""
        by = f" (by {model})" if model and model != outcome.analyzer else ""
        verdict = outcome.safety_verdict
        return format_html("{}{}", badge(verdict, verdict, SAFETY_TONES.get(verdict, "muted")), by)

    @admin.display(description="safety flag")
    def safety_flag(self, obj):
        safety = self.outcome_of(obj).safety
        return safety.category if safety is not None and safety.category not in ("", "none") else ""

    @admin.display(description="safety risk")
    def safety_risk_read(self, obj):
        """The risk, and where it stands against the review band when the step recorded that."""
        outcome = self.outcome_of(obj)
        if outcome.safety_risk is None:
            return ""
        reason = outcome.safety.reason if outcome.safety is not None and outcome.safety.verdict != "unsafe" else ""
        return reason or f"{outcome.safety_risk:.2f}"

    @admin.display(description="held because")
    def held_because(self, obj):
        return self.outcome_of(obj).held_because

    @admin.display(description="waiting because")
    def waiting_because(self, obj):
        """What holds up an item the pipeline has not decided (the model endpoint failing), as its author reads it."""
        return waiting_reason() if obj.status in WAITING else ""
