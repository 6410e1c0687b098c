"""The author's hints in `notes`: the EigenFlux client sends a JSON object there (type, domains, summary,
expire_time, source_type, keywords, expected_response). They are the author's claims about the broadcast,
never trusted over its content: the extraction prompt shows them labelled inside a delimited block, the
local analyzer takes them where the content agrees (pipeline.llm.local.hints), and a valid declared
expire_time (a date-time in the future, cut to ITEM_EXPIRY_MAX_DAYS ahead) becomes the item's expiry.
Notes that are not such an object stay free text, as before.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime

from django.utils import timezone

from items.expiry import expiry_capped

BROADCAST_TYPES = ("supply", "demand", "info", "alert")
SOURCE_TYPES = ("original", "curated", "forwarded")
NO_REPLY = frozenset({"", "none", "null", "noreply", "no_reply", "no reply", "no-reply", "n/a"})
MAX_TAGS = 10
MAX_KEYWORDS = 8
TAG_LENGTH = 64
SUMMARY_LENGTH = 300
RESPONSE_LENGTH = 200


@dataclass(frozen=True)
class AuthorHints:
    broadcast_type: str = ""
    domains: tuple[str, ...] = ()
    summary: str = ""
    expire_time: datetime | None = None  # only a valid, future date-time, at most ITEM_EXPIRY_MAX_DAYS ahead
    declared_expire_time: str = ""  # as written, for the prompt
    source_type: str = ""
    keywords: tuple[str, ...] = ()
    expected_response: str | None = None  # None: not declared; "no_reply"; or what a reply should contain
    free_text: str = ""  # notes that are not a hints object, unchanged

    @property
    def declared(self) -> bool:
        return bool(
            self.broadcast_type
            or self.domains
            or self.summary
            or self.declared_expire_time
            or self.source_type
            or self.keywords
            or self.expected_response is not None
        )

    def prompt_lines(self) -> str:
        """One labelled line per declared hint (values on one line each), for the extraction prompt."""
        lines = []
        if self.broadcast_type:
            lines.append(f"type: {self.broadcast_type}")
        if self.domains:
            lines.append(f"domains: {', '.join(self.domains)}")
        if self.summary:
            lines.append(f"summary: {self.summary}")
        if self.keywords:
            lines.append(f"keywords: {', '.join(self.keywords)}")
        if self.declared_expire_time:
            validity = "" if self.expire_time else " (not a valid future date-time; ignore it)"
            lines.append(f"expire_time: {self.declared_expire_time}{validity}")
        if self.source_type:
            lines.append(f"source_type: {self.source_type}")
        if self.expected_response is not None:
            lines.append(f"expected_response: {self.expected_response}")
        return "\n".join(lines)


def _line(value: str, limit: int) -> str:
    return " ".join(value.split())[:limit]


def _tags(value: object, limit: int) -> tuple[str, ...]:
    values = [value] if isinstance(value, str) else value if isinstance(value, list) else []
    tags: list[str] = []
    for entry in values:
        if isinstance(entry, str):
            tag = _line(entry, TAG_LENGTH).lower()
            if tag and tag not in tags:
                tags.append(tag)
    return tuple(tags[:limit])


def future_expire_time(value: str, *, now: datetime | None = None) -> datetime | None:
    """An ISO 8601 date or date-time (naive means UTC) that lies in the future, else None; one beyond
    ITEM_EXPIRY_MAX_DAYS is cut to that horizon (items.expiry)."""
    try:
        moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    now = now or timezone.now()
    return expiry_capped(moment, now=now) if moment > now else None


def parse_author_hints(notes: str, *, now: datetime | None = None) -> AuthorHints:
    text = notes.strip()
    if not text.startswith("{"):
        return AuthorHints(free_text=notes)
    try:
        data = json.loads(text)
    except ValueError:
        return AuthorHints(free_text=notes)
    if not isinstance(data, dict):
        return AuthorHints(free_text=notes)
    kind = data.get("type")
    source = data.get("source_type")
    summary = data.get("summary")
    declared_expiry = data.get("expire_time")
    declared_expiry = _line(declared_expiry, 40) if isinstance(declared_expiry, str) else ""
    response: str | None = None
    if "expected_response" in data:
        raw = data["expected_response"]
        if raw is None or (isinstance(raw, str) and raw.strip().lower() in NO_REPLY):
            response = "no_reply"
        elif isinstance(raw, str):
            response = _line(raw, RESPONSE_LENGTH)
    hints = AuthorHints(
        broadcast_type=kind.strip().lower()
        if isinstance(kind, str) and kind.strip().lower() in BROADCAST_TYPES
        else "",
        domains=_tags(data.get("domains"), MAX_TAGS),
        summary=_line(summary, SUMMARY_LENGTH) if isinstance(summary, str) else "",
        expire_time=future_expire_time(declared_expiry, now=now) if declared_expiry else None,
        declared_expire_time=declared_expiry,
        source_type=source.strip().lower()
        if isinstance(source, str) and source.strip().lower() in SOURCE_TYPES
        else "",
        keywords=_tags(data.get("keywords"), MAX_KEYWORDS),
        expected_response=response,
    )
    # A JSON object that declares none of the known hints is just the author's text.
    return hints if hints.declared else AuthorHints(free_text=notes)
