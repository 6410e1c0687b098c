"""The local analyzer measured field by field on the labelled corpus (bench/data): shared by the accuracy
floors in the tests and the figures bench/local_analyzer_accuracy.py prints."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import regex

from pipeline.llm import local

CORPUS = Path(__file__).resolve().parents[3] / "bench" / "data" / "search_corpus.jsonl"
GROUPS = ("en", "zh", "ja", "mixed", "all")
_HAN = regex.compile(r"\p{Han}")
_KANA = regex.compile(r"[\p{Hiragana}\p{Katakana}]")
_LATIN_WORDS = regex.compile(r"\b[a-zA-Z]{3,}\b")


def corpus() -> list[dict]:
    with CORPUS.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def suggestion_language_ok(text: str, lang: str) -> bool:
    """In the item's language, or omitted. A Chinese or Japanese suggestion may quote English product names, but
    must not be an English sentence."""
    if not text:
        return True
    if lang == "zh":
        return bool(_HAN.search(text)) and not _KANA.search(text) and len(_LATIN_WORDS.findall(text)) <= 4
    if lang == "ja":
        return bool(_KANA.search(text)) and len(_LATIN_WORDS.findall(text)) <= 4
    return not _HAN.search(text) and not _KANA.search(text)


def term_found(term: str, keywords: list[str]) -> bool:
    term = term.casefold()
    return any(term == keyword or term in keyword for keyword in (k.casefold() for k in keywords))


def corpus_tally() -> dict[str, dict[str, list[int]]]:
    """{field: {language group: [right, total]}} over the corpus."""
    tally: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    for doc in corpus():
        extraction = local.extract(content=doc["content"])
        suggestion = local.suggestion(
            content=doc["content"], summary=extraction.summary, broadcast_type=extraction.broadcast_type
        ).suggestion
        fields = {
            "language": (int(extraction.lang == doc["expected_lang"]), 1),
            "broadcast type": (int(extraction.broadcast_type == doc["broadcast_type"]), 1),
            "domain precision": (sum(d in doc["domains"] for d in extraction.domains), len(extraction.domains)),
            "main domain found": (int(doc["domains"][0] in extraction.domains), 1),
            "has a domain": (int(bool(extraction.domains)), 1),
            "key terms found": (
                sum(term_found(term, extraction.keywords) for term in doc["key_terms"]),
                len(doc["key_terms"]),
            ),
            "suggestion language": (int(suggestion_language_ok(suggestion, doc["expected_lang"])), 1),
            "not discarded": (int(not extraction.discard and extraction.quality >= 0.2), 1),
        }
        for name, (right, total) in fields.items():
            for key in (doc["lang"], "all"):
                tally[name][key][0] += right
                tally[name][key][1] += total
    return tally


def share(tally: dict[str, dict[str, list[int]]], field: str, group: str = "all") -> float:
    right, total = tally[field][group]
    return right / total if total else 1.0
