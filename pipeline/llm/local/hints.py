"""The local analyzer's use of the author's hints (pipeline.llm.author_hints): each hint is taken only where
the content agrees with it, and never rescues a discard.

- type: taken when the content has a cue word for it, or when the analysis found no cue for any type
  (it defaulted to "info"); the expected response and timeliness follow a changed type.
- domains: a declared tag is kept when the analysis found it (or what it stands for, e.g. "tech" for
  "software") or the content names it; declared tags come first.
- keywords: kept when the content contains them; declared ones come first.
- summary: used when every word of it occurs in the content, give or take an inflection (a rewording, never
  words only the notes hold: pipeline.llm.author_hints.summary_agrees).
- source_type: taken unless the content reads as forwarded and the hint says otherwise.
- expected_response: a declared "no reply" wins; a declared reply on an item analysed as needing none
  becomes the type's usual reply.

The analyzer itself never sees the hints object: JSON notes reach it as no notes at all, so their keys
("type", "summary", "expire_time" ...) can no longer turn into keywords; free-text notes reach only its
discard check, never a public field. (The expiry is applied for every
analyzer by pipeline.llm.tasks.extract_item.)
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from pipeline.llm.author_hints import AuthorHints, contains, parse_author_hints, summary_agrees
from pipeline.llm.local.lexicon import hits
from pipeline.llm.schemas import Extraction

# What common client tags stand for in the local analyzer's domain lexicon.
DOMAIN_ALIASES = {
    "tech": "software",
    "technology": "software",
    "devops": "software",
    "dev": "software",
    "hr": "jobs",
    "hiring": "jobs",
    "recruiting": "jobs",
    "healthcare": "health",
    "medical": "health",
    "ml": "ai",
    "machine learning": "ai",
    "llm": "ai",
    "gpu": "compute",
    "cloud": "compute",
    "infra": "compute",
    "infrastructure": "compute",
    "fintech": "finance",
    "markets": "finance",
    "blockchain": "crypto",
    "web3": "crypto",
    "defi": "crypto",
    "cybersecurity": "security",
    "infosec": "security",
}
TYPE_RESPONSE = {"demand": "offer", "supply": "contact", "info": "feedback", "alert": "answer"}
Extractor = Callable[..., Extraction]


def with_author_hints(extract: Extractor) -> Extractor:
    """Wrap the local extractor: parse the hints out of the notes, analyse the content, reconcile."""

    @functools.wraps(extract)
    def extract_with_hints(*, content: str, notes: str = "", url: str = "") -> Extraction:
        hints = parse_author_hints(notes)
        result = extract(content=content, notes=hints.free_text, url=url)
        return reconcile(result, hints, content=content, url=url)

    return extract_with_hints


def _type_agrees(kind: str, analysed: str, content: str) -> bool:
    return kind == analysed or analysed == "info" or bool(hits("type_cues", content, kind))


def _domains(hints: AuthorHints, analysed: list[str], text: str) -> list[str]:
    kept = [
        tag for tag in hints.domains if tag in analysed or DOMAIN_ALIASES.get(tag) in analysed or contains(text, tag)
    ]
    return (kept + [tag for tag in analysed if tag not in kept])[:10]


def _keywords(hints: AuthorHints, analysed: list[str], content: str) -> list[str]:
    kept = [term for term in hints.keywords if contains(content, term)]
    return (kept + [term for term in analysed if term not in kept])[:8]


def reconcile(result: Extraction, hints: AuthorHints, *, content: str, url: str = "") -> Extraction:
    if result.discard or not hints.declared:
        return result
    update: dict[str, Any] = {}
    kind: str = result.broadcast_type
    if hints.broadcast_type and _type_agrees(hints.broadcast_type, kind, content):
        kind = hints.broadcast_type
    if kind != result.broadcast_type:
        update["broadcast_type"] = kind
        if result.expected_response in ("offer", "contact") or kind in ("demand", "supply"):
            update["expected_response"] = TYPE_RESPONSE[kind] if kind in ("demand", "supply") else "no_reply"
        if kind == "alert" and result.timeliness == "evergreen":
            update["timeliness"] = "timely"
    expected = update.get("expected_response", result.expected_response)
    if hints.expected_response == "no_reply":
        update["expected_response"] = "no_reply"
    elif hints.expected_response and expected == "no_reply":
        update["expected_response"] = TYPE_RESPONSE[kind]
    update["domains"] = _domains(hints, list(result.domains), f"{content}\n{url}")
    update["keywords"] = _keywords(hints, list(result.keywords), content)
    if hints.summary and summary_agrees(hints.summary, content):
        update["summary"] = hints.summary
    if hints.source_type and (result.source_type != "forwarded" or hints.source_type == "forwarded"):
        update["source_type"] = hints.source_type
    return Extraction.model_validate({**result.model_dump(), **update})
