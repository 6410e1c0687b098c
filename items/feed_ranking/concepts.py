"""Concepts across languages: the search lexicon's groups (items/data/search_lexicon.json) found in a text, so a
reader who seeks 台风 warnings and an item about a typhoon share a concept whatever their languages."""

from __future__ import annotations

import functools
import json
import unicodedata
from dataclasses import dataclass

import regex

from items.textsearch import LEXICON_PATH

_CJK_RUN = regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}ー々]+")
_WORD = regex.compile(r"[\p{L}\p{N}]+(?:[-.+#][\p{L}\p{N}]+)*")


@dataclass(frozen=True)
class _Lexicon:
    concept: dict[str, int]  # term -> its group's index
    longest_words: int
    longest_cjk: int
    # What a term can start with: its first word (spaced scripts), its first two characters (CJK). A position
    # where no term starts is passed over without building its n-grams.
    first_words: frozenset[str]
    cjk_starts: frozenset[str]


@functools.cache
def _lexicon() -> _Lexicon:
    data = json.loads(LEXICON_PATH.read_text(encoding="utf-8"))
    concept: dict[str, int] = {}
    for index, group in enumerate(data["groups"]):
        for raw in group:
            term = unicodedata.normalize("NFKC", raw).lower().strip()
            if len(term) >= 2:
                concept.setdefault(term, index)
    cjk = [len(term) for term in concept if _CJK_RUN.fullmatch(term)]
    words = [len(term.split()) for term in concept if not _CJK_RUN.search(term)]
    return _Lexicon(
        concept,
        longest_words=max(words, default=1),
        longest_cjk=max(cjk, default=2),
        first_words=frozenset(term.split()[0] for term in concept if not _CJK_RUN.search(term) and term.split()),
        cjk_starts=frozenset(term[:2] for term in concept if _CJK_RUN.fullmatch(term)),
    )


@functools.lru_cache(maxsize=20_000)
def concepts(text: str) -> frozenset[int]:
    """The lexicon groups whose terms occur in `text`: word n-grams of spaced scripts and every substring of a
    CJK run, looked up (a dictionary probe each, no pattern scan)."""
    lexicon = _lexicon()
    normalised = unicodedata.normalize("NFKC", text).lower()
    found: set[int] = set()
    words = _WORD.findall(_CJK_RUN.sub(" ", normalised))
    for start in range(len(words)):
        if words[start] not in lexicon.first_words:
            continue
        for size in range(1, lexicon.longest_words + 1):
            if (index := lexicon.concept.get(" ".join(words[start : start + size]))) is not None:
                found.add(index)
    for run in _CJK_RUN.findall(normalised):
        for start in range(len(run) - 1):
            if run[start : start + 2] not in lexicon.cjk_starts:
                continue
            for end in range(start + 2, min(len(run), start + lexicon.longest_cjk) + 1):
                if (index := lexicon.concept.get(run[start:end])) is not None:
                    found.add(index)
    return frozenset(found)


def item_concepts(content: str, keywords: list[str] | tuple[str, ...]) -> list[int]:
    """An item's concepts as stored on it (ProcessedItem.concepts): those of its content and keywords, sorted."""
    return sorted(concepts(" ".join([content, *keywords])))
