"""Share of broadcasts the review queue holds (docs/enrichment.md#the-review-queue), with the offline analyzer, on a
labelled mix: the search corpus (bench/data/search_corpus.jsonl, ordinary broadcasts) and the tests' hand-labelled
set (tests/pipeline/llm/labelled_broadcasts.py: normal broadcasts, spam, logs, gibberish, injections, phishing,
error pages) and the safety set (bench/data/safety.jsonl: unsafe, safe-but-edgy and normal, en/zh/ja). No database
needed.

    .venv/bin/python bench/review_queue.py [--show N]

Each broadcast goes through the enrichment's decisions in the pipeline's order, with the very functions the
pipeline uses: the safety gate (`local.safety_verdict`: unsafe is discarded), extraction (`local.extract`: its
discard verdict, then the quality gate), then `pipeline.enrichment_steps.review_hold` with the configured
thresholds (REVIEW_SAFETY_RISK, QUALITY_THRESHOLD, REVIEW_QUALITY_BELOW). What is not measured: the model
calls' latency, grouping, the suggestion (they never decide a hold), and readers' reports. Target: at most 10 %
of all broadcasts held.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "eigenflux.settings")
if __name__ == "__main__":
    # Only when run: imported (by the tests, by bench/fresh_set.py) it must not change its importer's environment,
    # which the tests hand on to the processes they start (a LOG_LEVEL here silenced their INFO lines).
    os.environ.setdefault("LOG_LEVEL", "WARNING")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402

from pipeline.enrichment_steps import review_hold  # noqa: E402
from pipeline.llm import local  # noqa: E402
from tests.pipeline.llm.corpus_accuracy import corpus  # noqa: E402
from tests.pipeline.llm.labelled_broadcasts import HELD_OUT, LABELLED  # noqa: E402

TARGET = 0.10
OUTCOMES = ("published", "held", "discarded")


def outcome(text: str) -> tuple[str, str]:
    """(published | held | discarded, the category): the pipeline's decisions for one broadcast."""
    verdict = local.safety_verdict(content=text)
    if not verdict.safe:
        return "discarded", f"safety:{verdict.flag}"
    extraction = local.extract(content=text)
    if extraction.discard:
        return "discarded", f"extraction:{extraction.discard_reason}"
    if extraction.quality < settings.QUALITY_THRESHOLD:
        return "discarded", "low_quality"
    held = review_hold(verdict.risk, extraction.quality)
    return ("held", held.category) if held is not None else ("published", "")


def labelled_mix() -> list[tuple[str, str, str]]:
    """(set, label, text): the corpus's broadcasts are all ordinary ("normal")."""
    mix = [("corpus", "normal", doc["content"]) for doc in corpus()]
    mix += [("labelled", label, text) for text, label, _ in LABELLED]
    mix += [("held-out", label, text) for text, label, _ in HELD_OUT]
    with (ROOT / "bench" / "data" / "safety.jsonl").open(encoding="utf-8") as lines:
        mix += [("safety", case["label"], case["text"]) for case in map(json.loads, lines)]
    return mix


def review_share(show: int = 0) -> float:
    """Print the share held per set and per label, and the categories; return the share of all broadcasts held."""
    mix = labelled_mix()
    results = [(name, label, text, *outcome(text)) for name, label, text in mix]
    print(
        f"\nReview queue with the offline analyzer: REVIEW_SAFETY_RISK {settings.REVIEW_SAFETY_RISK:.2f}, "
        f"quality band [{settings.QUALITY_THRESHOLD:.2f}, {settings.REVIEW_QUALITY_BELOW:.2f})"
    )
    print(f"{'set / label':<22}{'broadcasts':>11}" + "".join(f"{o:>11}" for o in OUTCOMES) + f"{'held %':>9}")
    print("-" * (22 + 11 * (1 + len(OUTCOMES)) + 9))
    rows: dict[str, Counter] = {}
    for name, label, _, result, _ in results:
        for key in (f"set {name}", f"label {label}", "all"):
            rows.setdefault(key, Counter())[result] += 1
    for key, counts in sorted(rows.items(), key=lambda kv: (kv[0] == "all", kv[0])):
        total = sum(counts.values())
        cells = "".join(f"{counts[o]:>11}" for o in OUTCOMES)
        print(f"{key:<22}{total:>11}{cells}{counts['held'] / total:>9.1%}")
    categories = Counter(category for *_, result, category in results if result == "held")
    print("held by category: " + (", ".join(f"{c} {n}" for c, n in categories.most_common()) or "none"))
    share = rows["all"]["held"] / len(results)
    verdict = "within" if share <= TARGET else "ABOVE"
    print(f"held: {share:.1%} of {len(results)} broadcasts ({verdict} the {TARGET:.0%} target)")
    for name, label, text, _, category in [r for r in results if r[3] == "held"][:show]:
        print(f"  [{name}/{label}] {category}: {text[:90]}")
    return share


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--show", type=int, default=0, help="print this many held broadcasts")
    review_share(parser.parse_args().show)


if __name__ == "__main__":
    main()
