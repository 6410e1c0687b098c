"""The author's hints in `notes`: the EigenFlux client sends a JSON object there (type, domains, summary,
expire_time, source_type, keywords, expected_response). They are the author's claims about the broadcast,
never trusted over its content, and notes are the author's alone: no text of them may reach a field other
agents read or search unless the content already holds it (docs/enrichment.md#notes-stay-private).

So the extraction prompt shows only supported_hints() - closed-vocabulary values (type, source_type, a reply
wanted or not, a valid expiry, known domain tags) and text the content contains (keywords, tags, a summary
every word of which it has) - labelled inside a delimited block; the local analyzer takes them under the
same rules (pipeline.llm.local.hints); a valid declared expire_time (in the future, cut to
ITEM_EXPIRY_MAX_DAYS ahead) becomes the item's expiry. Notes that are not such an object are free text,
which reaches no model but the safety gate.
"""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import dataclass, replace
from datetime import UTC, datetime

import regex
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
# Domain tags a hint may name without the content naming them: the prompt's list and the client's common tags.
KNOWN_DOMAINS = frozenset(
    [
        "ai",
        "software",
        "compute",
        "finance",
        "crypto",
        "jobs",
        "research",
        "security",
        "health",
        "energy",
        "logistics",
        "real_estate",
        "education",
        "legal",
        "marketing",
        "travel",
        "food",
        "climate",
        "media",
        "government",
        "tech",
        "technology",
        "devops",
        "dev",
        "hr",
        "hiring",
        "recruiting",
        "healthcare",
        "medical",
        "ml",
        "llm",
        "gpu",
        "cloud",
        "infra",
        "infrastructure",
        "fintech",
        "markets",
        "blockchain",
        "web3",
        "defi",
        "cybersecurity",
        "infosec",
    ]
)
_WORD = regex.compile(r"[\p{L}\p{N}]+")
_CJK = regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}]")
_CJK_RUN = regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}]+")
_STOP = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "for",
        "from",
        "has",
        "have",
        "in",
        "is",
        "it",
        "of",
        "on",
        "or",
        "our",
        "the",
        "this",
        "to",
        "we",
        "with",
        "you",
        "your",
    ]
)
# A summary word matches a content word that it extends, or that extends it, by one of these endings only (not
# any few letters: "acme" must not let "acmeai" through).
INFLECTIONS = frozenset({"s", "es", "d", "ed", "ing", "r", "er", "ers", "ion", "ions"})


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


def contains(text: str, term: str) -> bool:
    """`term` occurs in `text` as whole words (CJK terms: as a substring), case-insensitive."""
    if _CJK.search(term):
        return term in text
    return re.search(rf"(?<!\w){re.escape(term)}(?!\w)", text, re.IGNORECASE) is not None


def _units(text: str) -> set[str]:
    """Words, and for CJK text character pairs, to compare a summary with the content: a CJK summary's Latin
    words and numbers are units too, so none of them can ride in on the CJK part's agreement."""
    units: set[str] = set()
    for run in _CJK_RUN.findall(text):
        units |= {a + b for a, b in itertools.pairwise(run)} or {run}
    rest = _CJK_RUN.sub(" ", text)
    return units | {word for word in (w.lower() for w in _WORD.findall(rest)) if word not in _STOP}


def summary_agrees(summary: str, content: str) -> bool:
    """Every word of the summary (stop words aside) is in the content, give or take an inflection ("price" /
    "prices", "review" / "reviewer"): a rewording of the content, never words only the notes hold."""
    claimed, present = _units(summary), _units(content)
    if len(claimed) < 2:
        return False

    def inflected(a: str, b: str) -> bool:
        shorter, longer = sorted((a, b), key=len)
        return len(shorter) >= 4 and longer.startswith(shorter) and longer[len(shorter) :] in INFLECTIONS

    def found(unit: str) -> bool:
        return unit in present or any(inflected(unit, word) for word in present)

    return all(found(unit) for unit in claimed)


def supported_hints(hints: AuthorHints, *, content: str, url: str = "") -> AuthorHints:
    """The hints a model may see: closed-vocabulary values and text the content (or url) already holds. What is
    left out could only reach the item's public fields by the model echoing the author's private notes."""
    text = f"{content}\n{url}"
    response = hints.expected_response
    return replace(
        hints,
        domains=tuple(tag for tag in hints.domains if tag in KNOWN_DOMAINS or contains(text, tag)),
        keywords=tuple(term for term in hints.keywords if contains(content, term)),
        summary=hints.summary if summary_agrees(hints.summary, content) else "",
        declared_expire_time=hints.expire_time.isoformat() if hints.expire_time else "",
        expected_response=None if response is None else "no_reply" if response == "no_reply" else "replies wanted",
        free_text="",
    )


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
