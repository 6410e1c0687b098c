"""Accuracy of the offline local analyzer, field by field, on the labelled corpus (bench/data) and on the
hand-labelled discard set of the tests (tests/pipeline/llm/labelled_broadcasts.py). No database needed.

    .venv/bin/python bench/local_analyzer_accuracy.py [--show N]

Fields: language, broadcast type, domains (precision of what it tags; recall of the main domain; items left
with no domain), keywords (labelled key terms found among the extracted keywords), suggestions (written in
the item's language, or omitted, rather than an English template around foreign words), and the
discard/safety class of the tests' labelled set. The tests hold floors on the same figures
(tests/pipeline/llm/test_local_analyzer_corpus.py).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "eigenflux.settings")
os.environ.setdefault("LOG_LEVEL", "WARNING")

import django  # noqa: E402

django.setup()

from pipeline.llm import local  # noqa: E402
from tests.pipeline.llm.corpus_accuracy import GROUPS, corpus, corpus_tally  # noqa: E402
from tests.pipeline.llm.labelled_broadcasts import HELD_OUT, LABELLED  # noqa: E402

_SAFETY_CLASS = {"prompt_injection": "injection", "phishing": "phishing", "fraud": "spam", "malware": "injection"}
_DISCARD_CLASS = {
    "spam": "spam",
    "runtime_log": "log",
    "gibberish": "gibberish",
    "error_page": "error_page",
    "malicious": "injection",
}


def predicted_class(text: str) -> str:
    """What the pipeline would make of the text: the safety gate first, then extraction's discard."""
    verdict = local.safety_verdict(content=text)
    if not verdict.safe:
        return _SAFETY_CLASS.get(verdict.flag, "injection")
    extraction = local.extract(content=text)
    return _DISCARD_CLASS[extraction.discard_reason] if extraction.discard else "normal"


def corpus_report(show: int) -> None:
    docs = corpus()
    started = time.perf_counter()
    tally = corpus_tally()
    elapsed = time.perf_counter() - started
    print(
        f"\nLocal analyzer on bench/data/search_corpus.jsonl ({len(docs)} broadcasts, "
        f"{elapsed * 1000 / len(docs):.1f} ms per broadcast for extraction + suggestion)"
    )
    print(f"{'field':<22}" + "".join(f"{g:>10}" for g in GROUPS))
    print("-" * (22 + 10 * len(GROUPS)))
    for name, by_group in tally.items():
        cells = []
        for group in GROUPS:
            right, total = by_group[group]
            cells.append(f"{right / total:>10.0%}" if total else f"{'-':>10}")
        print(f"{name:<22}" + "".join(cells))
    examples = [doc for doc in docs if doc["lang"] in ("zh", "ja", "mixed")][:show]
    if examples:
        print("\nexamples")
    for doc in examples:
        extraction = local.extract(content=doc["content"])
        suggestion = local.suggestion(
            content=doc["content"], summary=extraction.summary, broadcast_type=extraction.broadcast_type
        ).suggestion
        print(f"  {doc['id']:<6} {doc['content'][:40]}")
        print(f"         keywords {extraction.keywords} domains {extraction.domains} type {extraction.broadcast_type}")
        print(f"         suggestion {suggestion!r}")


def class_report() -> None:
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
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--show", type=int, default=6, help="print this many CJK examples")
    args = parser.parse_args()
    corpus_report(args.show)
    class_report()


if __name__ == "__main__":
    main()
