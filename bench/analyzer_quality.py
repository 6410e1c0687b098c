"""Quality of the local analyzer's judgments on labelled sets, one section per judgment, each printing tables.

    .venv/bin/python -m bench.analyzer_quality                    # every section
    .venv/bin/python -m bench.analyzer_quality --section safety   # the safety check only
    .venv/bin/python -m bench.analyzer_quality --section content  # spam, quality, type, keywords
    .venv/bin/python -m bench.analyzer_quality --tuning-only      # every section, the held-out halves left out
    .venv/bin/python -m bench.analyzer_quality --fresh            # the first fresh set only (now a development set)
    .venv/bin/python -m bench.analyzer_quality --fresh2           # the second fresh set only (now a development set)
    .venv/bin/python -m bench.analyzer_quality --fresh3           # the third fresh set only (now a development set)
    .venv/bin/python -m bench.analyzer_quality --fresh4           # the fourth fresh set only (a development set)
    .venv/bin/python -m bench.analyzer_quality --fresh5           # the fifth fresh set only (spent as a test set)
    .venv/bin/python -m bench.analyzer_quality --fresh6           # the sixth fresh set only (a test set, run twice)
    .venv/bin/python -m bench.analyzer_quality --fresh7           # the seventh fresh set only (a test set)

safety: bench/data/safety.jsonl (bench/safety_set.py), the tuning half and the held-out half reported apart, then
the probe set (bench/data/safety_probe.jsonl, a development set);
per language and per category: precision and recall of blocking; safe-but-edgy and normal posts passed;
the calibration of the risk; CPU microseconds per item.

content: bench/data/quality_*.jsonl (bench/analyzer_quality_content.py, which also runs alone with --show):
spam blocked and normal passed by the gates, broadcast type per language, keyword precision/recall@5, the CPU
of one extraction; tuning and held-out halves apart.

fresh (only with --fresh, --fresh2, ... --fresh7, never part of the default run): bench/data/safety_fresh.jsonl,
safety_fresh2.jsonl, safety_fresh3.jsonl or safety_fresh4.jsonl (test sets until their misses were read on 3 or 4
December, development sets since), safety_fresh5.jsonl (never tuned on, spent as a test set), safety_fresh6.jsonl
or safety_fresh7.jsonl (test sets, never tuned on) (bench/fresh_set.py), written apart from the analyzer, through the
pipeline's decisions (safety gate, extraction, quality gate, review hold): unsafe blocked, edgy passed, spam blocked,
normal passed per language and category.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "eigenflux.settings")
os.environ["LLM_PROVIDER"] = "local"

import django

django.setup()

from bench import fresh_set  # noqa: E402
from bench.safety_set import PROBE_SET, half, load_cases  # noqa: E402
from pipeline.llm import local  # noqa: E402
from pipeline.llm.local.safety_classifier import classifier  # noqa: E402

RISK_BINS = (0.0, 0.2, 0.35, 0.5, 0.65, 0.8, 0.9, 1.01)


def _rate(hit: int, total: int) -> str:
    return f"{hit / total:.2f} ({hit}/{total})" if total else "-"


def _judge(cases: list[dict[str, Any]]) -> list[tuple[dict[str, Any], bool, float]]:
    judged = []
    for case in cases:
        verdict = local.safety_verdict(content=case["text"])
        judged.append((case, not verdict.safe, verdict.risk if verdict.risk is not None else 0.0))
    return judged


def _blocking_table(judged: list[tuple[dict[str, Any], bool, float]], key: str) -> None:
    """Precision and recall of blocking, grouped by language or by category (unsafe cases' category)."""
    groups: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])  # true blocks, unsafe, blocks
    for case, blocked, _ in judged:
        unsafe = case["label"] == "unsafe"
        names = [case["lang"], "all"] if key == "lang" else ([case["category"]] if unsafe else [])
        names += [] if key == "lang" or not blocked or unsafe else ["(false blocks)"]
        for name in names:
            group = groups[name]
            group[0] += unsafe and blocked
            group[1] += unsafe
            group[2] += blocked
    print(f"  {key:<16} {'recall (unsafe blocked)':<26} precision of blocking")
    for name in sorted(groups):
        true_blocks, unsafe, blocks = groups[name]
        print(f"  {name:<16} {_rate(true_blocks, unsafe):<26} {_rate(true_blocks, blocks)}")


def _passed_table(judged: list[tuple[dict[str, Any], bool, float]]) -> None:
    print(f"  {'lang':<6} {'unsafe blocked':<16} {'edgy passed':<16} normal passed")
    for lang in ("en", "zh", "ja", "all"):
        rows = [(case, blocked) for case, blocked, _ in judged if lang in (case["lang"], "all")]
        cells = []
        for label, want_blocked in (("unsafe", True), ("edgy", False), ("normal", False)):
            of_label = [blocked for case, blocked in rows if case["label"] == label]
            cells.append(_rate(sum(blocked == want_blocked for blocked in of_label), len(of_label)))
        print(f"  {lang:<6} {cells[0]:<16} {cells[1]:<16} {cells[2]}")


def _calibration_table(judged: list[tuple[dict[str, Any], bool, float]]) -> None:
    print("  risk bin      items  share unsafe")
    for low, high in itertools.pairwise(RISK_BINS):
        labels = [case["label"] == "unsafe" for case, _, risk in judged if low <= risk < high]
        bracket = ")" if high <= 1.0 else "]"
        print(f"  [{low:.2f}, {min(high, 1.0):.2f}{bracket}  {len(labels):>5}  {_rate(sum(labels), len(labels))}")


def _cpu_per_item(cases: list[dict[str, Any]], rounds: int = 5) -> float:
    classifier()  # trained before timing: once per process
    start = time.process_time()
    for _ in range(rounds):
        for case in cases:
            local.safety_verdict(content=case["text"])
    return (time.process_time() - start) / (rounds * len(cases)) * 1e6


def safety_section(halves: tuple[str, ...] = ("tuning", "heldout")) -> None:
    start = time.process_time()
    classifier.cache_clear()
    classifier()
    print(f"== safety: classifier trained in {(time.process_time() - start) * 1000:.0f} ms CPU")
    for name in halves:
        cases = half(name)
        judged = _judge(cases)
        print(f"\n-- {name} half ({len(cases)} cases)")
        _passed_table(judged)
        _blocking_table(judged, "lang")
        _blocking_table(judged, "category")
        _calibration_table(judged)
        # The held-out half's mistakes stay unprinted: reading them would be tuning against it.
        for case, blocked, risk in judged if name == "tuning" else []:
            if blocked != (case["label"] == "unsafe"):
                print(f"  miss: {case['label']}/{case['category']} risk={risk:.2f} {case['text'][:70]}")
    # The probe set: written apart from the labelled set and the training files, never trained on; the
    # thresholds and the classifier's features were chosen on it (so it is a development set, not a held-out one).
    probe = load_cases(PROBE_SET)
    print(f"\n-- probe set ({len(probe)} cases, bench/data/safety_probe.jsonl)")
    _passed_table(_judge(probe))
    print(f"\nCPU per item (safety check, all cases): {_cpu_per_item(half('tuning') + half('heldout')):.0f} µs")


def content_section() -> None:
    from bench import analyzer_quality_content as content

    print("== content: spam, quality, type, keywords")
    print(f"{'half':9} {'measure':14} {'en':>10}  {'zh':>10}  {'ja':>10}  {'all':>10}")
    content.gate_table(False)
    content.type_table(False)
    content.keyword_table(False)
    print(f"extraction CPU: {content.cpu_per_item():.0f} µs per item")


SECTIONS: dict[str, Callable[[], None]] = {"safety": safety_section, "content": content_section}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--section", choices=sorted(SECTIONS), action="append", help="run only this section")
    parser.add_argument(
        "--tuning-only",
        action="store_true",
        help="leave the held-out halves out (while working: every look at them is a little tuning on them)",
    )
    fresh_set.add_flags(parser)
    args = parser.parse_args()
    if args.fresh_set:
        from bench.review_queue import outcome

        fresh_set.fresh_section(outcome, args.fresh_set)
        return
    if args.tuning_only:
        from bench import analyzer_quality_content as content

        content.REPORTED = ("tuning",)
        SECTIONS["safety"] = lambda: safety_section(("tuning",))
    for name in args.section or sorted(SECTIONS):
        SECTIONS[name]()


if __name__ == "__main__":
    main()
