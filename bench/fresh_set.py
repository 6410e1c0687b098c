"""The fresh sets: broadcasts written apart from the analyzer. The first (safety_fresh.jsonl) was a test set until
3 December, when its misses were read for the fourth safety pass, a development set since (docs/benchmarks.md);
the second (safety_fresh2.jsonl) and the third (safety_fresh3.jsonl), spent as test sets, became development sets on
the evening of 3 December, when their misses were read for the safe side's pass; the fourth (safety_fresh4.jsonl),
run as a test set twice on 3 December, became a development set on 4 December; the fifth (safety_fresh5.jsonl), never
tuned on, was spent as a test set by its second run on 4 December; the sixth (safety_fresh6.jsonl) is a test set;
the seventh (safety_fresh7.jsonl), written on 6 December for the multilingual learned analyzer, is a test set;
the eighth (safety_fresh8.jsonl), written that evening (its writer's own categories kept in `kind`), is a test set.
The ninth and tenth (written that night from one brief) are development sets: the learned gates train on them, as
on the first five (pipeline.llm.local.gate_data.APART_SETS), and thresholds are chosen on them; the eleventh, from
the same brief, is a test set. The twelfth to fifteenth were written on 7 December from a second brief (four writers,
each its own emphasis): the twelfth, thirteenth and fourteenth are development sets, the fifteenth a test set.

    .venv/bin/python -m bench.analyzer_quality --fresh    # bench/data/safety_fresh.jsonl, 240 (now a development set)
    .venv/bin/python -m bench.analyzer_quality --fresh2   # bench/data/safety_fresh2.jsonl, 270 (a development set)
    .venv/bin/python -m bench.analyzer_quality --fresh3   # bench/data/safety_fresh3.jsonl, 270 (a development set)
    .venv/bin/python -m bench.analyzer_quality --fresh4   # bench/data/safety_fresh4.jsonl, 270 (a development set)
    .venv/bin/python -m bench.analyzer_quality --fresh5   # bench/data/safety_fresh5.jsonl, 270
    .venv/bin/python -m bench.analyzer_quality --fresh6   # bench/data/safety_fresh6.jsonl, 270
    .venv/bin/python -m bench.analyzer_quality --fresh7   # bench/data/safety_fresh7.jsonl, 300
    .venv/bin/python -m bench.analyzer_quality --fresh8   # bench/data/safety_fresh8.jsonl, 299
    .venv/bin/python -m bench.analyzer_quality --fresh9   # bench/data/safety_fresh9.jsonl, 300 (a development set)
    .venv/bin/python -m bench.analyzer_quality --fresh10  # bench/data/safety_fresh10.jsonl, 300 (a development set)
    .venv/bin/python -m bench.analyzer_quality --fresh11  # bench/data/safety_fresh11.jsonl, 300
    .venv/bin/python -m bench.analyzer_quality --fresh12  # bench/data/safety_fresh12.jsonl, 299 (a development set)
    .venv/bin/python -m bench.analyzer_quality --fresh13  # bench/data/safety_fresh13.jsonl, 300 (a development set)
    .venv/bin/python -m bench.analyzer_quality --fresh14  # bench/data/safety_fresh14.jsonl, 299 (a development set)
    .venv/bin/python -m bench.analyzer_quality --fresh15  # bench/data/safety_fresh15.jsonl, 299
    .venv/bin/python -m bench.analyzer_quality --fresh16  # bench/data/safety_fresh16.jsonl, 299
    .venv/bin/python -m bench.analyzer_quality --fresh17  # bench/data/safety_fresh17.jsonl, 299 (a development set)
    .venv/bin/python -m bench.analyzer_quality --fresh18  # bench/data/safety_fresh18.jsonl, 299 (a development set)

Each broadcast goes through the offline analyzer in the pipeline's order, with the function the review-queue bench
uses (`bench.review_queue.outcome`: the safety gate, the extraction's discard verdict, the quality gate, then the
review hold), and ends published, held for a moderator, or discarded. Printed per language and per category:
unsafe blocked, safe-but-edgy passed, spam blocked, normal passed; the items the review queue holds are counted
apart (neither blocked nor passed). There is no split. Its mistakes are printed as counts per deciding stage only,
never as texts (reading them, as the fourth pass did with a throwaway script, makes it a development set).
"""

from __future__ import annotations

import argparse
import json
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

FRESH_SET = Path(__file__).resolve().parent / "data" / "safety_fresh.jsonl"
FRESH_SET_2 = FRESH_SET.with_name("safety_fresh2.jsonl")
FRESH_SET_3 = FRESH_SET.with_name("safety_fresh3.jsonl")
FRESH_SET_4 = FRESH_SET.with_name("safety_fresh4.jsonl")
FRESH_SET_5 = FRESH_SET.with_name("safety_fresh5.jsonl")
FRESH_SET_6 = FRESH_SET.with_name("safety_fresh6.jsonl")
FRESH_SET_7 = FRESH_SET.with_name("safety_fresh7.jsonl")
FRESH_SET_8 = FRESH_SET.with_name("safety_fresh8.jsonl")
FRESH_SET_9 = FRESH_SET.with_name("safety_fresh9.jsonl")
FRESH_SET_10 = FRESH_SET.with_name("safety_fresh10.jsonl")
FRESH_SET_11 = FRESH_SET.with_name("safety_fresh11.jsonl")
FRESH_SET_12 = FRESH_SET.with_name("safety_fresh12.jsonl")
FRESH_SET_13 = FRESH_SET.with_name("safety_fresh13.jsonl")
FRESH_SET_14 = FRESH_SET.with_name("safety_fresh14.jsonl")
FRESH_SET_15 = FRESH_SET.with_name("safety_fresh15.jsonl")
FRESH_SET_16 = FRESH_SET.with_name("safety_fresh16.jsonl")
FRESH_SET_17 = FRESH_SET.with_name("safety_fresh17.jsonl")
FRESH_SET_18 = FRESH_SET.with_name("safety_fresh18.jsonl")
# The sets by the name the bench's flag gives them (`--fresh`, `--fresh2`, ... `--fresh18`).
FRESH_SETS = {
    "fresh": FRESH_SET,
    "fresh2": FRESH_SET_2,
    "fresh3": FRESH_SET_3,
    "fresh4": FRESH_SET_4,
    "fresh5": FRESH_SET_5,
    "fresh6": FRESH_SET_6,
    "fresh7": FRESH_SET_7,
    "fresh8": FRESH_SET_8,
    "fresh9": FRESH_SET_9,
    "fresh10": FRESH_SET_10,
    "fresh11": FRESH_SET_11,
    "fresh12": FRESH_SET_12,
    "fresh13": FRESH_SET_13,
    "fresh14": FRESH_SET_14,
    "fresh15": FRESH_SET_15,
    "fresh16": FRESH_SET_16,
    "fresh17": FRESH_SET_17,
    "fresh18": FRESH_SET_18,
}
# What each set's figures are: the first set's misses were read while tuning on 3 December, the second's and the
# third's that evening.
STANDING = {
    FRESH_SET: "written apart, a development set since 3 Dec",
    FRESH_SET_2: "written apart, a development set since 3 Dec (evening)",
    FRESH_SET_3: "written apart, a development set since 3 Dec (evening)",
    FRESH_SET_4: "written apart, a development set since 4 Dec",
    FRESH_SET_5: "written apart; run twice as a test set (3, 4 Dec), a development set since 6 Dec (gates train on it)",
    FRESH_SET_6: "written apart, a test set never tuned on (run twice, 4 Dec)",
    FRESH_SET_7: "written apart, a test set never tuned on",
    FRESH_SET_8: "written apart on 6 Dec (evening), a test set never tuned on",
    FRESH_SET_9: "written apart on 6 Dec (night), a development set: gates train on it, thresholds chosen on it",
    FRESH_SET_10: "written apart on 6 Dec (night), a development set: gates train on it, thresholds chosen on it",
    FRESH_SET_11: "written apart on 6 Dec (night), a test set never tuned on",
    FRESH_SET_12: "written apart on 7 Dec, a development set: gates train on it, thresholds chosen on it",
    FRESH_SET_13: "written apart on 7 Dec, a development set: gates train on it, thresholds chosen on it",
    FRESH_SET_14: "written apart on 7 Dec, a development set: gates train on it, thresholds chosen on it",
    FRESH_SET_15: "written apart on 7 Dec, a test set never tuned on",
    FRESH_SET_16: "written apart on 7 Dec (night), a test set never tuned on",
    FRESH_SET_17: "written apart on 7 Dec (night), a development set: gates train on it",
    FRESH_SET_18: "written apart on 7 Dec (night), a development set: gates train on it",
}
LANGS = ("en", "zh", "ja")
UNSAFE_CATEGORIES = (
    "weapons",
    "threats",
    "carding",
    "fraud",
    "malware",
    "drugs",
    "sexual",
    "trafficking",
    "hate",
    "self_harm",
    "doxxing",
)
# What each label should come to: unsafe and spam never reach a reader, edgy and normal posts do.
WANTED = {"unsafe": "discarded", "edgy": "published", "spam": "discarded", "normal": "published"}
MEASURE = {"unsafe": "unsafe blocked", "edgy": "edgy passed", "spam": "spam blocked", "normal": "normal passed"}
FIELDS = ("lang", "label", "category", "kind", "text")


def add_flags(parser: argparse.ArgumentParser) -> None:
    """`--fresh`, `--fresh2` ... `--fresh18` (one at most): the set to run, as `args.fresh_set` (a path, or None)."""
    group = parser.add_mutually_exclusive_group()
    for name, path in FRESH_SETS.items():
        group.add_argument(f"--{name}", dest="fresh_set", action="store_const", const=path, help=f"{path.name} only")


@dataclass(frozen=True)
class Judged:
    """One broadcast and what the pipeline made of it: published | held | discarded, and the deciding stage."""

    lang: str
    label: str
    category: str
    kind: str
    outcome: str
    stage: str


def _checked(where: str, case: object) -> dict[str, str]:
    if not isinstance(case, dict) or set(case) != set(FIELDS) or not all(isinstance(v, str) for v in case.values()):
        raise ValueError(f"{where}: expected string fields {', '.join(FIELDS)}")
    if case["lang"] not in LANGS or case["label"] not in WANTED:
        raise ValueError(f"{where}: unknown lang {case['lang']!r} or label {case['label']!r}")
    wanted_category = UNSAFE_CATEGORIES if case["label"] == "unsafe" else (case["label"],)
    if case["category"] not in wanted_category or not case["text"].strip():
        raise ValueError(f"{where}: category {case['category']!r} or an empty text")
    return case


def load_fresh(path: Path = FRESH_SET) -> list[dict[str, str]]:
    """The set's cases, each checked: the documented fields, languages, labels and categories (ValueError if not)."""
    cases = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            cases.append(_checked(f"{path.name} line {number}", json.loads(line)))
    return cases


def judge(cases: Iterable[dict[str, str]], decide: Callable[[str], tuple[str, str]]) -> list[Judged]:
    """Run every case through `decide` (text -> (outcome, stage))."""
    return [
        Judged(case["lang"], case["label"], case["category"], case["kind"], *decide(case["text"])) for case in cases
    ]


def label_rates(cases: Iterable[dict[str, str]], decide: Callable[[str], tuple[str, str]]) -> list[str]:
    """Unsafe stopped (blocked or held), edgy passed, spam blocked, normal passed: one cell per label, as the
    threshold and training benches print them."""
    counts = tally(judge(cases, decide), lambda judged: [judged.label])
    cells = []
    for label in WANTED:
        count = counts[label]
        right = count["right"] + (count["held"] if label == "unsafe" else 0)
        cells.append(f"{right / max(count['total'], 1):.3f}")
    return cells


def tally(judged: Iterable[Judged], group: Callable[[Judged], Iterable[str]]) -> dict[str, Counter[str]]:
    """Per group name: how many came out right (`right`), were held (`held`), and in all (`total`)."""
    groups: dict[str, Counter[str]] = defaultdict(Counter)
    for item in judged:
        for name in group(item):
            groups[name]["total"] += 1
            groups[name]["right"] += item.outcome == WANTED[item.label]
            groups[name]["held"] += item.outcome == "held"
    return groups


def cell(counts: Counter[str]) -> str:
    """`0.93 (28/30) h1`: the share that came out right, and how many more the review queue held."""
    if not counts["total"]:
        return "-"
    text = f"{counts['right'] / counts['total']:.2f} ({counts['right']}/{counts['total']})"
    return text + (f" h{counts['held']}" if counts["held"] else "")


def language_table(judged: list[Judged]) -> None:
    groups = tally(judged, lambda item: (f"{item.lang}/{item.label}", f"all/{item.label}"))
    gate = tally(
        [item for item in judged if item.label == "unsafe"],
        lambda item: (item.lang, "all") if item.stage.startswith("safety:") else (),
    )
    print(f"  {'lang':<5}" + "".join(f" {MEASURE[label]:<19}" for label in WANTED) + " unsafe blocked by safety gate")
    for lang in (*LANGS, "all"):
        unsafe = groups[f"{lang}/unsafe"]["total"]
        by_gate = f"{gate[lang]['total'] / unsafe:.2f} ({gate[lang]['total']}/{unsafe})" if unsafe else "-"
        print(f"  {lang:<5}" + "".join(f" {cell(groups[f'{lang}/{label}']):<19}" for label in WANTED) + f" {by_gate}")


def _category_rows(judged: list[Judged]) -> list[str]:
    """Row names in print order: each unsafe category, the unsafe kinds worth a row, then each label's kinds."""
    rows = [f"unsafe/{category}" for category in UNSAFE_CATEGORIES]
    rows += [f"unsafe:{kind}" for kind in sorted({item.kind for item in judged if item.label == "unsafe"} - {"plain"})]
    for label in ("edgy", "spam", "normal"):
        rows += [f"{label}:{kind}" for kind in sorted({item.kind for item in judged if item.label == label})]
    return rows


def category_table(judged: list[Judged]) -> None:
    def names(item: Judged) -> list[str]:
        row = [f"{item.label}/{item.category}"] if item.label == "unsafe" else []
        row += [f"{item.label}:{item.kind}"]
        return [f"{lang}|{name}" for lang in (item.lang, "all") for name in row]

    groups = tally(judged, names)
    print(f"  {'category (or kind)':<26}" + "".join(f" {lang:<13}" for lang in LANGS) + " all")
    for row in _category_rows(judged):
        short = [groups[f"{lang}|{row}"] for lang in LANGS]
        cells = [f"{c['right']}/{c['total']}" + (f" h{c['held']}" if c["held"] else "") for c in short]
        print(f"  {row:<26}" + "".join(f" {text:<13}" for text in cells) + f" {cell(groups[f'all|{row}'])}")


def miss_table(judged: list[Judged]) -> None:
    """What decided the wrong outcomes, as counts (the texts stay unprinted: this set is never tuned on)."""
    misses: Counter[tuple[str, str]] = Counter()
    for item in judged:
        if item.outcome != WANTED[item.label]:
            misses[(item.label, f"{item.outcome} {item.stage}".strip())] += 1
    for (label, stage), count in sorted(misses.items()):
        print(f"  {MEASURE[label]} missed: {count:>3}  {stage}")


def fresh_section(decide: Callable[[str], tuple[str, str]], path: Path = FRESH_SET) -> None:
    cases = load_fresh(path)
    judged = judge(cases, decide)
    print(f"== fresh set ({len(cases)} cases, {path.name}; {STANDING.get(path, 'written apart')}, no split)")
    print("  hN: N more held for a moderator by the review queue (neither blocked nor passed)")
    language_table(judged)
    print()
    category_table(judged)
    print()
    miss_table(judged)
