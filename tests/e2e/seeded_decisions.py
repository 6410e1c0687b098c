"""The decision history tests/e2e/browser_check.py seeds for its sample items, worded as the pipeline words it
(pipeline.enrichment_steps, pipeline.review_holds) with the local analyzer, so the screenshots show what a
moderator sees."""

from __future__ import annotations

GATES = [("blacklist", "pass", "", "", ""), ("duplicate", "pass", "", "", "")]
SAFE = ("safety", "pass", "", "risk 0.05, under the review band (REVIEW_SAFETY_RISK 0.35)", "local")
EXTRACTED = ("extraction", "pass", "", "", "local")
BAND = "is in the review band 0.35 to 0.50 (REVIEW_SAFETY_RISK 0.35)"
QUALITY_BAND = "quality 0.25 is in the review band 0.20 to 0.30 (QUALITY_THRESHOLD to REVIEW_QUALITY_BELOW)"

# By the index of the seeded item: the completed offer, the blacklisted giveaway, the low-quality duplicate offer,
# the item held for its safety risk and the one held for its quality.
STEPS = {
    0: [*GATES, SAFE, EXTRACTED, ("quality", "pass", "", "quality 0.80", "")],
    3: [("blacklist", "discard", "keyword", "matched 'crypto giveaway'", "")],
    4: [*GATES, SAFE, EXTRACTED, ("quality", "discard", "low_quality", "quality 0.15 < threshold 0.20", "local")],
    5: [
        *GATES,
        ("safety", "uncertain", "", "risk 0.48, in the review band 0.35 to 0.50 (REVIEW_SAFETY_RISK)", "local"),
        EXTRACTED,
        ("quality", "pass", "", "quality 0.60", ""),
        ("review", "held", "safety_risk", f"risk 0.48 {BAND}", ""),
    ],
    6: [
        *GATES,
        SAFE,
        EXTRACTED,
        ("quality", "pass", "", "quality 0.25", ""),
        ("review", "held", "borderline_quality", QUALITY_BAND, ""),
    ],
}


def seeded_decisions() -> list[tuple[int, str, str, str, str, str]]:
    """(item index, stage, verdict, category, reason, model), in the order the steps ran."""
    return [(index, *step) for index, steps in STEPS.items() for step in steps]
