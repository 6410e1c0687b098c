"""Typed, validated results of every model task. Validation is strict: an unknown enum value, an out-of-range
number or an extra key makes the reply invalid (the caller retries later); nothing is coerced into the database."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from items.text import text_problem

# Safety flags, most severe first: when several apply, the model reports the first one in this order.
SafetyFlag = Literal[
    "none",
    "child_safety",
    "violent_extremism",
    "malware",
    "prompt_injection",
    "phishing",
    "fraud",
    "hate_harassment",
    "self_harm",
    "sexual_content",
    "private_data",
]
SAFETY_FLAGS: tuple[SafetyFlag, ...] = get_args(SafetyFlag)[1:]

# The only five reasons extraction may discard for (docs/enrichment.md#discard-verdicts); "" when the item is kept.
DiscardReason = Literal["", "gibberish", "runtime_log", "spam", "malicious", "error_page"]
DISCARD_REASONS: tuple[str, ...] = get_args(DiscardReason)[1:]
BroadcastType = Literal["supply", "demand", "info", "alert"]
Timeliness = Literal["breaking", "timely", "evergreen"]
SourceType = Literal["original", "curated", "forwarded"]
# What a reader is expected to do: nothing, answer a question, make an offer, get in touch, give feedback.
ExpectedResponse = Literal["no_reply", "answer", "offer", "contact", "feedback"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _storable_text(cls, data: Any) -> Any:
        """Text PostgreSQL cannot store (NUL, lone surrogates) makes the reply invalid, not a database error."""
        if isinstance(data, dict):
            for key, value in data.items():
                for text in value if isinstance(value, list) else [value]:
                    problem = text_problem(text) if isinstance(text, str) else None
                    if problem:
                        raise ValueError(f"{key} {problem}")
        return data


class SafetyVerdict(_Strict):
    safe: bool
    flag: SafetyFlag
    reason: str = Field(max_length=500)
    risk: float | None = Field(default=None, ge=0.0, le=1.0)

    @model_validator(mode="after")
    def _flag_matches_verdict(self) -> SafetyVerdict:
        if self.safe != (self.flag == "none"):
            raise ValueError('flag must be "none" exactly when safe is true')
        return self


class Extraction(_Strict):
    discard: bool
    discard_reason: DiscardReason
    summary: str = Field(max_length=600)
    keywords: list[str] = Field(max_length=8)
    domains: list[str] = Field(max_length=10)
    broadcast_type: BroadcastType
    lang: str = Field(pattern=r"^(?:[a-z]{2,3}(?:-[A-Za-z0-9]{2,8})?|und)$")
    quality: float = Field(ge=0.0, le=1.0)
    timeliness: Timeliness
    geo: str = Field(max_length=100)
    source_type: SourceType
    expected_response: ExpectedResponse
    expire_time: str = Field(max_length=40)
    # How sure the model is of its admission verdict (discard or keep), 0-1; optional: a model that never says
    # stays as it was. A spam discard below REVIEW_DISCARD_CONFIDENCE_BELOW waits for a moderator instead.
    confidence: float | None = Field(default=None, ge=0.0, le=1.0)

    @field_validator("keywords", "domains")
    @classmethod
    def _short_nonblank_terms(cls, terms: list[str]) -> list[str]:
        for term in terms:
            if not term.strip() or len(term) > 64:
                raise ValueError("terms must be non-blank and at most 64 characters")
        return terms

    @field_validator("expire_time")
    @classmethod
    def _iso_or_empty(cls, value: str) -> str:
        if value:
            try:
                datetime.fromisoformat(value)
            except ValueError:
                raise ValueError("expire_time must be an ISO 8601 date-time or empty") from None
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Extraction:
        if self.discard != bool(self.discard_reason):
            raise ValueError("discard_reason must be set exactly when discard is true")
        if not self.discard and not 3 <= len(self.keywords) <= 8:
            raise ValueError("a kept item needs 3 to 8 keywords")
        if not self.discard and not self.summary.strip():
            raise ValueError("a kept item needs a summary")
        return self


class Suggestion(_Strict):
    suggestion: str = Field(max_length=400)


class ProfileKeywords(_Strict):
    keywords: list[str] = Field(max_length=20)
    country_codes: list[str] = Field(max_length=20)

    @field_validator("country_codes")
    @classmethod
    def _alpha2(cls, codes: list[str]) -> list[str]:
        for code in codes:
            if len(code) != 2 or not code.isascii() or not code.isupper() or not code.isalpha():
                raise ValueError(f"{code!r} is not an ISO 3166-1 alpha-2 code")
        return codes


class OfficialReply(_Strict):
    message: str = Field(min_length=1, max_length=1000)


# Prompt name -> the schema its reply must satisfy (the start-up check compares each prompt's example with it).
TASK_SCHEMAS: dict[str, type[BaseModel]] = {
    "safety": SafetyVerdict,
    "process_item": Extraction,
    "suggest_action": Suggestion,
    "extract_keywords": ProfileKeywords,
    "official_reply": OfficialReply,
}
