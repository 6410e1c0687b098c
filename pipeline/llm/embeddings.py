"""Which embedding model is in use, and the semantic-search similarity floor calibrated for it.

A cosine similarity means different things to different models (all-MiniLM-L6-v2 puts unrelated sentences
near 0.0-0.2, feature hashing puts any two texts sharing a few character trigrams above that), so the floor
below which semantic search returns nothing belongs to the model. The values here were calibrated on the
labelled corpus with `bench/search_quality.py --calibrate` (docs/search.md); SEARCH_MIN_SIMILARITY overrides
them. For a model that is not listed, calibrate it the same way and set SEARCH_MIN_SIMILARITY.
"""

from __future__ import annotations

from django.conf import settings

from pipeline.llm.clients import provider

# Keyed by `local:<LOCAL_EMBEDDING>`: e5's values were checked again in its second space (e5.2,
# eigenflux.base.embedding_space.LOCAL_SPACES; docs/search.md, "Language directions"). Recalibrate on a change of space.
SEMANTIC_FLOORS = {
    "local:e5": 0.225,
    "local:minilm": 0.35,
    "local:hashing": 0.225,
}
# Once a query's nearest item clears its floor (the query has an answer), the items below it are kept down to this
# lower floor. e5 places an answer written in another language about 0.1 lower than one in the query's language
# (docs/search.md, "The answer floor and the tail floor"); a single floor high enough to leave nonsense queries
# unanswered cut those answers off. Models not listed keep one floor.
SEMANTIC_TAIL_FLOORS = {"local:e5": 0.15}
# Similarity grouping (docs/enrichment.md#grouping). On the benchmark corpus (326 broadcasts, 37 labelled near-
# duplicates) e5's language-neutral vectors put no pair of different topics above 0.59; at 0.70 they group 34 of
# the 37 near-duplicates and 8 other pairs of one topic, which are translations of one message (docs/search.md,
# "One meaning space"). MiniLM's 0.80 was chosen on the same corpus.
GROUPING_THRESHOLDS = {"local:e5": (0.70, 0.75)}
DEFAULT_GROUPING = (0.80, 0.85)
# OpenAI's text-embedding-3 models place related short texts at roughly 0.3-0.6 and unrelated ones below
# 0.2; not calibrated here (no such model offline), so a middle value: measure and set SEARCH_MIN_SIMILARITY.
UNCALIBRATED_FLOOR = 0.25


def embedding_model() -> str:
    """`local:minilm`, `local:hashing`, or the remote embedding model's name."""
    if provider() == "local":
        return f"local:{settings.LOCAL_EMBEDDING}"
    return settings.EMBEDDING_MODEL


def semantic_floor() -> float:
    return SEMANTIC_FLOORS.get(embedding_model(), UNCALIBRATED_FLOOR)


def semantic_tail_floor() -> float:
    """The floor of the items kept after a query's nearest item cleared semantic_floor()."""
    return SEMANTIC_TAIL_FLOORS.get(embedding_model(), semantic_floor())


def grouping_thresholds() -> tuple[float, float]:
    """The cosine at which a new item joins its nearest item's group, and the higher one an alert needs
    (SIMILARITY_THRESHOLD and ALERT_SIMILARITY_THRESHOLD when set, else the embedding's own)."""
    join, alert = GROUPING_THRESHOLDS.get(embedding_model(), DEFAULT_GROUPING)
    configured_join, configured_alert = settings.SIMILARITY_THRESHOLD, settings.ALERT_SIMILARITY_THRESHOLD
    return (
        join if configured_join is None else configured_join,
        alert if configured_alert is None else configured_alert,
    )
