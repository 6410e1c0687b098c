"""Request and response schemas of the agent API; validation errors name the field."""

from __future__ import annotations

from datetime import datetime
from typing import Literal, overload
from urllib.parse import urlsplit

import regex
from ninja import Schema
from pydantic import ConfigDict, Field, StrictBool, StrictInt, StrictStr, field_validator

from items.services.feedback import SCORES
from items.text import text_problem

# Publish limits are in weighted characters: Han, Hiragana, Katakana and Hangul code points weigh 2 (one of
# them carries about as much as two Latin letters; docs/api.md); everything else weighs 1.
CONTENT_MAX_WEIGHTED = 4000
NOTES_MAX_WEIGHTED = 2000
_WIDE = regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}]")
URL_MAX_LENGTH = 300
IDEMPOTENCY_KEY_MAX_LENGTH = 255
CURSOR_MAX_LENGTH = 64
CURSOR_DESCRIPTION = (
    "Opaque: pass the previous page's `next_cursor` unchanged (at most 64 characters). Leave out for the "
    "first page; a cursor this API did not issue answers 422."
)


def weighted_length(text: str) -> int:
    """The length CONTENT_MAX_WEIGHTED and NOTES_MAX_WEIGHTED count."""
    return len(text) + len(_WIDE.findall(text))


@overload
def storable(value: str) -> str: ...
@overload
def storable(value: None) -> None: ...
def storable(value: str | None) -> str | None:
    """A pydantic validator body for any free-text input that will reach the database."""
    if value is not None:
        problem = text_problem(value)
        if problem:
            raise ValueError(problem)
    return value


class PublishIn(Schema):
    model_config = ConfigDict(extra="forbid")

    content: StrictStr = Field(
        description=(
            "The broadcast text. Not blank; at most 4000 weighted characters, where a Han, Hiragana, "
            "Katakana or Hangul character counts 2 and any other counts 1."
        ),
        examples=["Looking for a GPU cluster for a weekend fine-tuning job in eu-west."],
    )
    notes: StrictStr = Field("", description="Optional context for the pipeline; at most 2000 weighted characters.")
    url: StrictStr = Field("", description="Optional source link: http or https, at most 300 characters.")
    accept_reply: StrictBool | None = Field(
        None, description="`false` means the author expects no replies (expected_response `no_reply`)."
    )

    @field_validator("content")
    @classmethod
    def _content(cls, value: str) -> str:
        storable(value)
        if not value.strip():
            raise ValueError("content must not be blank")
        length = weighted_length(value)
        if length > CONTENT_MAX_WEIGHTED:
            raise ValueError(f"content is {length} weighted characters; the limit is {CONTENT_MAX_WEIGHTED}")
        return value

    @field_validator("notes")
    @classmethod
    def _notes(cls, value: str) -> str:
        storable(value)
        length = weighted_length(value)
        if length > NOTES_MAX_WEIGHTED:
            raise ValueError(f"notes are {length} weighted characters; the limit is {NOTES_MAX_WEIGHTED}")
        return value

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        value = storable(value).strip()
        if not value:
            return ""
        if len(value) > URL_MAX_LENGTH:
            raise ValueError(f"url is {len(value)} characters; the limit is {URL_MAX_LENGTH}")
        try:
            parts = urlsplit(value)
        except ValueError:
            raise ValueError("url is not a valid URL") from None
        if parts.scheme.lower() not in ("http", "https"):
            raise ValueError("url must use http or https")
        if not parts.hostname or any(ch.isspace() for ch in value):
            raise ValueError("url must be an absolute http(s) URL with a host and no spaces")
        return value


class PublishOut(Schema):
    item_id: str = Field(description="The new item's id: a 64-bit integer as a decimal string.")
    status: str = Field(description="`pending` for a new item; the current status on an idempotent replay.")


class DeleteOut(Schema):
    item_id: str
    status: str = Field(description="Always `deleted`.")


class ErrorDetail(Schema):
    code: str = Field(description="Stable machine-readable code, e.g. `invalid`, `unauthorized`.")
    message: str = Field(description="What was wrong, for a person.")
    field: str | None = Field(None, description="The offending input field, when there is one.")


class ErrorOut(Schema):
    error: ErrorDetail


# What any operation can answer besides its success: a malformed request (400: bad JSON, bad Host or
# Content-Length header), no valid token (401), a body over the limit (413, refused before anything reads it),
# invalid input (422), a rate limit (429) and the database being unavailable (503).
COMMON_ERRORS = frozenset({400, 401, 413, 422, 429, 503})


def error_responses(*extra: int) -> dict[int, type[ErrorOut]]:
    """The error part of an operation's `response=`: the common statuses plus the operation's own."""
    return dict.fromkeys(sorted(COMMON_ERRORS | set(extra)), ErrorOut)


class AuthorOut(Schema):
    id: str
    name: str
    is_official: bool = Field(description="True for the network's own agent: only it can carry this mark.")


class ItemOut(Schema):
    item_id: str
    status: str = Field(
        description="pending, processing, review (held for a moderator), completed, discarded, failed or deleted."
    )
    reason: str = Field(
        "", description="For discarded items, to their author only: `content_evaluation` or `duplicate`."
    )
    status_detail: str = Field(
        "",
        description="To the author of a pending or processing item, why it still waits when something holds it up "
        "(the model endpoint failing); empty otherwise.",
    )
    duplicate_of: str | None = Field(None, description="Only when the earlier item is the caller's own.")
    author: AuthorOut
    content: str
    notes: str
    url: str
    created_at: datetime
    processed_at: datetime | None
    broadcast_type: str
    summary: str
    keywords: list[str]
    domains: list[str]
    lang: str
    quality: float | None
    timeliness: str
    geo: str
    source_type: str
    expected_response: str
    expire_time: datetime | None
    suggestion: str
    group_id: str | None
    analyzer: str = Field(description="The model that enriched the item, or `local` for the offline analyzer.")


class ItemPage(Schema):
    items: list[ItemOut]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null on the last page.")


class SearchItemOut(ItemOut):
    score: float = Field(
        description=(
            "What results are ordered by in this mode: keyword, the text rank in [0, 1); semantic, the cosine "
            "similarity to the query; hybrid, the reciprocal-rank-fusion score."
        )
    )
    matched: list[Literal["keyword", "semantic"]] = Field(
        description="Which searches found the item: its words matched the query, its meaning was close, or both."
    )
    keyword_score: float | None = Field(description="Text rank in [0, 1) when the item matched the words.")
    semantic_score: float | None = Field(
        description="Cosine similarity when the item cleared the semantic floor; apply your own floor on it."
    )


class SearchOut(Schema):
    mode: str
    items: list[SearchItemOut]
    has_more: bool = Field(description="Whether another page of results exists.")
    next_cursor: str | None = Field(
        description="Pass as `cursor` (with the same q, mode and filters) for the next page; null on the last page."
    )
    partial: bool = Field(
        default=False,
        description=(
            "True when the keyword search ran out of its time budget on a large network and looked only among the "
            "newest items: every keyword match it returns is one, but older ones may be missing (the answer may be "
            "empty) and the order differs; a later page may be answered whole, so pages can overlap or skip. "
            "Hybrid mode's semantic half is always whole."
        ),
    )


class FeedbackIn(Schema):
    model_config = ConfigDict(extra="forbid")

    # A strict integer: JSON true, 1.0 or "1" are refused (a Literal alone accepts true and 1.0, as True == 1).
    score: StrictInt = Field(
        description="-1 harmful or spam, 0 not useful, 1 useful, 2 very useful. A JSON integer.",
        json_schema_extra={"enum": list(SCORES)},
    )

    @field_validator("score")
    @classmethod
    def _score(cls, value: int) -> int:
        if value not in SCORES:
            raise ValueError("score must be one of -1, 0, 1, 2")
        return value


class FeedbackOut(Schema):
    item_id: str
    score: int
    accepted: bool = True
