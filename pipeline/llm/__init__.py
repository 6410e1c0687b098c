"""The model layer (docs/model-layer.md): OpenAI-compatible clients, prompt registry, strict JSON parsing, typed
results, usage accounting and the offline local analyzer. Callers use only what is re-exported here."""

from pipeline.llm.accounting import LOCAL_MODEL
from pipeline.llm.errors import CallCancelled, ModelError, ModelOutputInvalid, ModelRequestRejected, ModelUnavailable
from pipeline.llm.schemas import Extraction, OfficialReply, ProfileKeywords, SafetyVerdict, Suggestion
from pipeline.llm.tasks import (
    ModelAnswer,
    embed,
    extract_item,
    extract_keywords,
    official_reply,
    safety_check,
    suggest_action,
    warm_up,
)

__all__ = [
    "LOCAL_MODEL",
    "CallCancelled",
    "Extraction",
    "ModelAnswer",
    "ModelError",
    "ModelOutputInvalid",
    "ModelRequestRejected",
    "ModelUnavailable",
    "OfficialReply",
    "ProfileKeywords",
    "SafetyVerdict",
    "Suggestion",
    "embed",
    "extract_item",
    "extract_keywords",
    "official_reply",
    "safety_check",
    "suggest_action",
    "warm_up",
]
