"""Which kept items wait for a moderator, and why in words (docs/enrichment.md#the-review-queue): the safety
verdict's reading (a pass, or uncertain: a risk in the review band), and the hold decisions the enrichment records.
Each reason names the value, the band it fell in and the setting that draws the band, so the item's history says
why without a moderator having to know the thresholds; the admin puts the hold's category in words before it
(items.admin.outcome)."""

from __future__ import annotations

from django.conf import settings

from items.models import DecisionStage
from items.services.enrichment_state import Decision
from pipeline import llm
from pipeline.llm.clients import provider

# The safety verdict of a kept item whose risk is in the review band: not a pass (it waits for a moderator).
SAFETY_UNCERTAIN = "uncertain"


def safety_band() -> tuple[float, float]:
    """The review band of a safety risk: from REVIEW_SAFETY_RISK up to where the analyzer blocks by itself (the
    local analyzer at SAFETY_LOCAL_BLOCK_THRESHOLD; a model says unsafe whatever its risk, so up to 1)."""
    top = settings.SAFETY_LOCAL_BLOCK_THRESHOLD if provider() == "local" else 1.0
    return settings.REVIEW_SAFETY_RISK, max(top, settings.REVIEW_SAFETY_RISK)


def safety_reading(risk: float | None) -> tuple[str, str]:
    """The verdict and reason recorded for a safe answer: `pass`, or `uncertain` when its risk is in the review
    band (the item is then held, review_hold), with the risk and the band in words."""
    if risk is None:
        return "pass", ""
    if _in_safety_band(risk):
        return SAFETY_UNCERTAIN, f"risk {risk:.2f}, {_safety_band_words()} (REVIEW_SAFETY_RISK)"
    return "pass", f"risk {risk:.2f}, under the review band (REVIEW_SAFETY_RISK {settings.REVIEW_SAFETY_RISK:.2f})"


def _in_safety_band(risk: float | None) -> bool:
    return risk is not None and risk >= settings.REVIEW_SAFETY_RISK


def _safety_band_words() -> str:
    low, high = safety_band()
    return f"in the review band {low:.2f} to {high:.2f}"


def review_hold(safety_risk: float | None, quality: float) -> Decision | None:
    """The decision that holds a kept item for a moderator, or None. Held when the safety verdict was safe with a
    risk of at least REVIEW_SAFETY_RISK, or when the quality is in [QUALITY_THRESHOLD, REVIEW_QUALITY_BELOW)."""
    if _in_safety_band(safety_risk):
        low = settings.REVIEW_SAFETY_RISK
        reason = f"risk {safety_risk:.2f} is {_safety_band_words()} (REVIEW_SAFETY_RISK {low:.2f})"
        return Decision(DecisionStage.REVIEW, "held", "safety_risk", reason)
    if settings.QUALITY_THRESHOLD <= quality < settings.REVIEW_QUALITY_BELOW:
        reason = (
            f"quality {quality:.2f} is in the review band "
            f"{settings.QUALITY_THRESHOLD:.2f} to {settings.REVIEW_QUALITY_BELOW:.2f} "
            "(QUALITY_THRESHOLD to REVIEW_QUALITY_BELOW)"
        )
        return Decision(DecisionStage.REVIEW, "held", "borderline_quality", reason)
    return None


def discard_hold(extraction: llm.Extraction) -> Decision | None:
    """A spam discard the model gave with a confidence below REVIEW_DISCARD_CONFIDENCE_BELOW is held for a moderator
    instead (its fields are filled, as the prompt asks, so an approval publishes it). No confidence (the local
    analyzer, a model that never says): discarded as before."""
    confidence = extraction.confidence
    if extraction.discard_reason != "spam" or confidence is None:
        return None
    if confidence >= settings.REVIEW_DISCARD_CONFIDENCE_BELOW:
        return None
    reason = (
        f"discarded as spam with a confidence of {confidence:.2f}, under "
        f"{settings.REVIEW_DISCARD_CONFIDENCE_BELOW:.2f} (REVIEW_DISCARD_CONFIDENCE_BELOW)"
    )
    return Decision(DecisionStage.REVIEW, "held", "unsure_discard", reason)
