"""The moderators' decisions as labelled examples for the learned gates (docs/model-layer.md, "Learned gates").

Every decision a moderator makes about a post the pipeline judged says which gate was right, and which wrong:

| decision | what the pipeline had done | label |
|---|---|---|
| review: rejected | held it: safety risk in the review band | safety: unsafe |
| review: rejected | held it: borderline quality, or an unsure spam discard | spam: spam |
| review: rejected | published it; readers' reports pulled it | spam if the reason names spam, else unsafe |
| review: approved | held it for its safety risk, or readers' reports | safety: not unsafe |
| review: approved | held it for its quality or an unsure discard | spam: not spam |
| approved (override) | blocked it as unsafe | safety: not unsafe |
| approved (override) | discarded it at extraction or for low quality | spam: not spam |

Only an item's latest moderator decision counts (a moderator who changes their mind corrects the label), and
only items whose raw text still exists. Decisions by the pipeline or by readers alone are never labels.
"""

from __future__ import annotations

import regex

from items.models import DecisionStage, ModerationDecision
from pipeline.gate_training import MODERATOR_WEIGHT, Example

_NAMES_SPAM = regex.compile(r"\bspam|\bscam\b|\bbait\b|广告|垃圾|引流|スパム|宣伝", regex.IGNORECASE)
SAFETY_HOLDS = {"safety_risk"}
SPAM_HOLDS = {"borderline_quality", "unsure_discard"}


def _gate_of(decision: ModerationDecision, history: list[ModerationDecision]) -> tuple[str, bool] | None:
    """(gate, positive) for one moderator decision, from what the pipeline had decided before it. An approval of a
    post readers pulled is ("reader_safety", False): not unsafe, but on no risky topic the stance layer must learn."""
    before = [earlier for earlier in history if earlier.created_at <= decision.created_at and earlier.pk != decision.pk]
    if decision.stage == DecisionStage.REVIEW:
        holds = [
            earlier.category
            for earlier in before
            if earlier.stage == DecisionStage.REVIEW and earlier.verdict == "held"
        ]
        if not holds:
            return None
        hold, rejected = holds[-1], decision.verdict == "rejected"
        if hold in SAFETY_HOLDS:
            return "safety", rejected
        if hold in SPAM_HOLDS:
            return "spam", rejected
        if hold == "reader_reports":
            if not rejected:
                return "reader_safety", False
            return ("spam", True) if _NAMES_SPAM.search(decision.reason) else ("safety", True)
        return None
    if decision.stage == DecisionStage.MODERATOR and decision.verdict == "approved":
        for earlier in reversed(before):
            if earlier.stage == DecisionStage.SAFETY and earlier.verdict == "unsafe":
                return "safety", False
            if earlier.stage in (DecisionStage.EXTRACTION, DecisionStage.QUALITY) and earlier.verdict == "discard":
                return "spam", False
    return None


def moderator_examples() -> list[Example]:
    """The labelled examples of every item's latest moderator decision, oldest item first."""
    decided = (
        ModerationDecision.objects.filter(
            moderator__isnull=False, stage__in=[DecisionStage.REVIEW, DecisionStage.MODERATOR]
        )
        .exclude(verdict="held")
        .order_by("item_id", "-created_at", "-pk")
        .distinct("item_id")
    )
    latest = {decision.item_id: decision for decision in decided}
    histories: dict[int, list[ModerationDecision]] = {}
    for decision in ModerationDecision.objects.filter(item_id__in=latest).order_by("created_at", "pk"):
        histories.setdefault(decision.item_id, []).append(decision)
    texts = dict(
        ModerationDecision.objects.filter(item_id__in=latest).values_list("item_id", "item__raw__content").distinct()
    )
    examples = []
    for item_id in sorted(latest):
        labelled = _gate_of(latest[item_id], histories.get(item_id, []))
        text = texts.get(item_id)
        if labelled is not None and text:
            gate, positive = labelled
            source = f"moderator:{latest[item_id].pk}"
            examples.append(Example(text, gate.removeprefix("reader_"), positive, MODERATOR_WEIGHT, source))
            if gate == "safety":
                # A post held or blocked for its safety risk, or an unsafe one readers pulled, sits on a risky
                # topic: the moderator's decision teaches stance (unsafe against edgy) too, and a rejection teaches
                # the topic layer that such posts are about harm (an approval may be edgy or entirely ordinary).
                examples.append(Example(text, "stance", positive, MODERATOR_WEIGHT, source))
                if positive:
                    examples.append(Example(text, "topic", True, MODERATOR_WEIGHT, source))
    return examples
