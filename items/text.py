"""Content text rules: the normalisation exact dedup compares (and its hash), and whether PostgreSQL can store a
text at all. The publish limits' weighted length is with the limits, in items.api.schemas."""

from __future__ import annotations

import hashlib
import unicodedata

import regex

_SPACE = regex.compile(r"\s+")
_SURROGATE = regex.compile("[\ud800-\udfff]")


def normalise_content(text: str) -> str:
    """NFKC, case-folded, whitespace collapsed: what exact dedup compares."""
    return _SPACE.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def content_hash(text: str) -> str:
    return hashlib.sha256(normalise_content(text).encode("utf-8")).hexdigest()


def text_problem(value: str) -> str | None:
    """Why PostgreSQL could not store this text (a NUL, or a lone UTF-16 surrogate), or None if it can."""
    if "\x00" in value:
        return "must not contain NUL characters"
    if _SURROGATE.search(value):  # one scan in C, not a Python step per character
        return "must not contain unpaired surrogate code points"
    return None
