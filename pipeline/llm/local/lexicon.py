"""The local analyzer's shipped lexicon (data/lexicon.json), loaded once and compiled to phrase matchers."""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

LEXICON_PATH = Path(__file__).resolve().parent / "data" / "lexicon.json"


@functools.cache
def lexicon() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(LEXICON_PATH.read_text(encoding="utf-8"))
    return data


def phrase_pattern(terms: list[str]) -> re.Pattern[str]:
    """Case-insensitive matcher for whole words/phrases (word boundaries only where a term has word edges)."""
    parts = []
    for term in sorted(terms, key=len, reverse=True):
        # Word boundaries only around ASCII word edges: CJK text has no spaces between words.
        left = r"(?<!\w)" if term[:1].isascii() and term[:1].isalnum() else ""
        right = r"(?!\w)" if term[-1:].isascii() and term[-1:].isalnum() else ""
        parts.append(f"{left}{re.escape(term)}{right}")
    return re.compile("|".join(parts) or r"(?!x)x", re.IGNORECASE)


@functools.cache
def matcher(section: str, key: str | None = None) -> re.Pattern[str]:
    data = lexicon()[section]
    return phrase_pattern(data[key] if key is not None else data)


def hits(section: str, text: str, key: str | None = None) -> list[str]:
    return [match.group(0).lower() for match in matcher(section, key).finditer(text)]
