"""Content quality of the offline local analyzer on its own labelled sets (bench/data/quality_*.jsonl):
spam blocked and normal posts passed by the gates (discard verdict or quality below QUALITY_THRESHOLD),
broadcast type per language, keyword precision/recall@k, and the CPU time of one extraction.

    .venv/bin/python bench/analyzer_quality_content.py [--show]

Every set is split by a stable hash of the text into a tuning half and a held-out half (`half()`); the
heuristics were tuned on the tuning half only, so the held-out figures estimate accuracy on new text.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "bench" / "data"
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "eigenflux.settings")
os.environ.setdefault("LOG_LEVEL", "WARNING")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402

from pipeline.llm import local  # noqa: E402

HALVES = ("tuning", "held-out")
# The halves the tables print (analyzer_quality --tuning-only leaves the held-out one out).
REPORTED = HALVES
K = 5


def half(text: str) -> str:
    """Deterministic split: the first byte of the text's SHA-256, even -> tuning, odd -> held-out."""
    return HALVES[hashlib.sha256(text.encode("utf-8")).digest()[0] % 2]


def load(name: str) -> list[dict[str, object]]:
    lines = (DATA / name).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def blocked(text: str) -> bool:
    result = local.extract(content=text)
    return result.discard or result.quality < settings.QUALITY_THRESHOLD


def _cell(right: int, total: int) -> str:
    return f"{right}/{total} {right / max(1, total):.2f}"


def gate_table(show: bool) -> None:
    tally: Counter[tuple[str, str, str]] = Counter()
    for row in load("quality_spam.jsonl"):
        text, label, lang = str(row["text"]), str(row["label"]), str(row["lang"])
        right = blocked(text) == (label == "spam")
        tally[(half(text), label, lang)] += 1
        tally[(half(text), label, lang, "right")] += right  # type: ignore[index]
        if show and not right:
            print(f"  miss [{half(text)}] {label}: {text}  q={local.extract(content=text).quality}")
    for name in REPORTED:
        for label, what in (("spam", "spam blocked"), ("normal", "normal passed")):
            cells = []
            for lang in ("en", "zh", "ja", None):
                langs = (lang,) if lang else ("en", "zh", "ja")
                total = sum(tally[(name, label, code)] for code in langs)
                right = sum(tally[(name, label, code, "right")] for code in langs)  # type: ignore[misc]
                cells.append(_cell(right, total))
            print(f"{name:9} {what:14} " + "  ".join(f"{cell:>10}" for cell in cells))


def type_table(show: bool) -> None:
    tally: Counter[tuple[str, ...]] = Counter()
    for row in load("quality_types.jsonl"):
        text, gold, lang = str(row["text"]), str(row["type"]), str(row["lang"])
        got = local.extract(content=text).broadcast_type
        for key in ((half(text), lang), (half(text), "all")):
            tally[key] += 1
            tally[(*key, "right")] += got == gold
        if show and got != gold:
            print(f"  miss [{half(text)}] {gold} -> {got}: {text}")
    for name in REPORTED:
        cells = [_cell(tally[(name, lang, "right")], tally[(name, lang)]) for lang in ("en", "zh", "ja", "all")]
        print(f"{name:9} {'type accuracy':14} " + "  ".join(f"{cell:>10}" for cell in cells))


def _matches(term: str, gold: str) -> bool:
    return gold == term or gold in term or (len(term) >= 2 and term in gold)


def keyword_table(show: bool) -> None:
    sums: Counter[str] = Counter()
    for row in load("quality_keywords.jsonl"):
        text, gold = str(row["text"]), [str(term) for term in row["terms"]]  # type: ignore[attr-defined]
        found = local.extract(content=text).keywords[:K]
        name = half(text)
        sums[(name + ":p")] += sum(any(_matches(t, g) for g in gold) for t in found) / max(1, len(found))
        sums[(name + ":r")] += sum(any(_matches(t, g) for t in found) for g in gold) / len(gold)
        sums[name] += 1
        if show:
            print(f"  [{name}] gold {gold} got {found}")
    for name in REPORTED:
        n = max(1, sums[name])
        print(f"{name:9} keywords@{K}    precision {sums[name + ':p'] / n:.2f}  recall {sums[name + ':r'] / n:.2f}")


def cpu_per_item() -> float:
    texts = [str(row["text"]) for row in load("quality_spam.jsonl") + load("quality_types.jsonl")]
    for text in texts[:10]:  # load the segmenters and YAKE first
        local.extract(content=text)
    start = time.process_time()
    rounds = 3
    for _ in range(rounds):
        for text in texts:
            local.extract(content=text)
    return (time.process_time() - start) / (rounds * len(texts)) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--show", action="store_true", help="print every miss")
    args = parser.parse_args()
    print(f"{'half':9} {'measure':14} {'en':>10}  {'zh':>10}  {'ja':>10}  {'all':>10}")
    gate_table(args.show)
    type_table(args.show)
    keyword_table(args.show)
    print(f"extraction CPU: {cpu_per_item():.0f} µs per item")


if __name__ == "__main__":
    main()
