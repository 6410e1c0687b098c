"""Accuracy of the offline local analyzer, field by field, on the labelled corpus (bench/data) and on the
hand-labelled discard set of the tests (tests/pipeline/llm/labelled_broadcasts.py). No database needed.

    .venv/bin/python bench/local_analyzer_accuracy.py [--show N]

Fields: language, broadcast type, domains (precision of what it tags; recall of the main domain; items left
with no domain), keywords (labelled key terms found among the extracted keywords), suggestions (written in
the item's language, or omitted, rather than an English template around foreign words), and the
discard/safety class of the tests' labelled set.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import regex

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "eigenflux.settings")
os.environ.setdefault("LOG_LEVEL", "WARNING")

import django  # noqa: E402

django.setup()

from pipeline.llm import local  # noqa: E402
from tests.pipeline.llm.labelled_broadcasts import HELD_OUT, LABELLED  # noqa: E402

_SAFETY_CLASS = {"prompt_injection": "injection", "phishing": "phishing", "fraud": "spam", "malware": "injection"}
_DISCARD_CLASS = {
    "spam": "spam",
    "runtime_log": "log",
    "gibberish": "gibberish",
    "error_page": "error_page",
    "malicious": "injection",
}
_HAN = regex.compile(r"\p{Han}")
_KANA = regex.compile(r"[\p{Hiragana}\p{Katakana}]")
_LATIN_WORDS = regex.compile(r"\b[a-zA-Z]{3,}\b")


def predicted_class(text: str) -> str:
    """What the pipeline would make of the text: the safety gate first, then extraction's discard."""
    verdict = local.safety_verdict(content=text)
    if not verdict.safe:
        return _SAFETY_CLASS.get(verdict.flag, "injection")
    extraction = local.extract(content=text)
    return _DISCARD_CLASS[extraction.discard_reason] if extraction.discard else "normal"


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


def corpus_accuracy(show: int) -> dict[str, dict[str, tuple[int, int]]]:
    docs = [json.loads(line) for line in (ROOT / "bench" / "data" / "search_corpus.jsonl").open(encoding="utf-8")]
    tally: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    examples: list[str] = []
    started = time.perf_counter()
    for doc in docs:
        group = doc["lang"]
        extraction = local.extract(content=doc["content"])
        suggestion = local.suggestion(
            content=doc["content"], summary=extraction.summary, broadcast_type=extraction.broadcast_type
        ).suggestion
        fields = {
            "language": [int(extraction.lang == doc["expected_lang"]), 1],
            "broadcast type": [int(extraction.broadcast_type == doc["broadcast_type"]), 1],
            "domain precision": [sum(d in doc["domains"] for d in extraction.domains), len(extraction.domains)],
            "main domain found": [int(doc["domains"][0] in extraction.domains), 1],
            "has a domain": [int(bool(extraction.domains)), 1],
            "key terms found": [
                sum(term_found(t, extraction.keywords) for t in doc["key_terms"]),
                len(doc["key_terms"]),
            ],
            "suggestion language": [int(suggestion_language_ok(suggestion, doc["expected_lang"])), 1],
            "not discarded": [int(not extraction.discard and extraction.quality >= 0.2), 1],
        }
        for name, (right, total) in fields.items():
            for key in (group, "all"):
                tally[name][key][0] += right
                tally[name][key][1] += total
        if len(examples) < show and group in ("zh", "ja", "mixed"):
            examples.append(
                f"  {doc['id']:<6} {doc['content'][:40]}\n"
                f"         keywords {extraction.keywords} domains {extraction.domains}"
                f" type {extraction.broadcast_type}\n"
                f"         suggestion {suggestion!r}"
            )
    elapsed = time.perf_counter() - started
    print(
        f"\nLocal analyzer on bench/data/search_corpus.jsonl ({len(docs)} broadcasts, "
        f"{elapsed * 1000 / len(docs):.1f} ms per broadcast for extraction + suggestion)"
    )
    groups = ("en", "zh", "ja", "mixed", "all")
    print(f"{'field':<22}" + "".join(f"{g:>10}" for g in groups))
    print("-" * (22 + 10 * len(groups)))
    for name, by_group in tally.items():
        cells = []
        for g in groups:
            right, total = by_group[g]
            cells.append(f"{right / total:>10.0%}" if total else f"{'-':>10}")
        print(f"{name:<22}" + "".join(cells))
    if examples:
        print("\nexamples")
        print("\n".join(examples))
    return {name: {g: tuple(v) for g, v in by_group.items()} for name, by_group in tally.items()}


def class_accuracy() -> None:
    for title, rows in (("labelled (tuning) set", LABELLED), ("held-out set", HELD_OUT)):
        right, total = Counter(), Counter()
        for text, label, kind in rows:
            total[label] += 1
            right[label] += predicted_class(text) == label
            if label == "normal" and kind:
                total[f"type:{kind}"] += 1
                right[f"type:{kind}"] += local.extract(content=text).broadcast_type == kind
        print(f"\nDiscard/safety classes, {title} (right/total)")
        for key in sorted(total):
            print(f"  {key:<16} {right[key]:>3}/{total[key]:<3} {right[key] / total[key]:6.0%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--show", type=int, default=6, help="print this many CJK examples")
    args = parser.parse_args()
    corpus_accuracy(args.show)
    class_accuracy()


if __name__ == "__main__":
    main()
