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

SEMANTIC_FLOORS = {
    "local:minilm": 0.35,
    "local:hashing": 0.225,
}
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
