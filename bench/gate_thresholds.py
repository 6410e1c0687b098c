"""Where should the learned gates decide alone? Runs the whole offline analyzer (`bench.review_queue.outcome`, as
`analyzer_quality --freshN`) on development sets written apart (--sets) and on ordinary traffic (the search corpus,
bench/data/search_corpus.jsonl), once per value of one threshold at a time, the others at their settings:

- `SPAM_GATE_BLOCK` (--spam): the spam gate's probability from which a post is discarded as spam;
- `SAFETY_LOCAL_GATE_HOLD` (--hold): the safety gate's probability from which a post is held for a moderator.

Printed per value: unsafe stopped (blocked or held), edgy passed, spam blocked, normal passed, and the share of
ordinary traffic held and discarded. Choose on development sets only; report on a set nobody tuned on.

    .venv/bin/python -m bench.gate_thresholds --sets fresh9,fresh10 [--spam 0.3,0.5,0.7,1] [--hold 0.5,0.75,1]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.scratch import offline_django

offline_django()

from django.test import override_settings  # noqa: E402

from bench import fresh_set  # noqa: E402
from bench.review_queue import outcome  # noqa: E402
from pipeline.llm.local import e5  # noqa: E402
from tests.pipeline.llm.corpus_accuracy import corpus  # noqa: E402


def figures(cases: list[dict[str, str]], ordinary: list[str]) -> list[str]:
    decided = [outcome(text)[0] for text in ordinary]
    return fresh_set.label_rates(cases, outcome) + [
        f"{decided.count(name) / len(decided):.3f}" for name in ("held", "discarded")
    ]


def values(text: str) -> list[float]:
    return [float(value) for value in text.split(",") if value]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", required=True, help="development sets, e.g. fresh9,fresh10")
    parser.add_argument("--spam", type=values, default=values("0.3,0.4,0.5,0.6,0.7,0.8,0.9,1"))
    parser.add_argument("--hold", type=values, default=values("0.5,0.6,0.7,0.75,0.8,0.9,1"))
    args = parser.parse_args()
    cases = [case for name in args.sets.split(",") for case in fresh_set.load_fresh(fresh_set.FRESH_SETS[name])]
    ordinary = [document["content"] for document in corpus()]
    e5.keep_recent(2 * (len(cases) + len(ordinary)))  # each text is embedded once for the whole sweep
    print(f"{len(cases)} posts of {args.sets}; ordinary traffic: {len(ordinary)} posts of the search corpus")
    print(
        "| setting | value | unsafe stopped | edgy passed | spam blocked | normal passed | ordinary held "
        "| ordinary discarded |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name, grid in (("SPAM_GATE_BLOCK", args.spam), ("SAFETY_LOCAL_GATE_HOLD", args.hold)):
        for value in grid:
            with override_settings(**{name: value}):
                print(f"| {name} | {value:g} | " + " | ".join(figures(cases, ordinary)) + " |", flush=True)


if __name__ == "__main__":
    main()
