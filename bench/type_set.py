"""The local type model's training file (pipeline/llm/local/data/types_train.jsonl): the search corpus's
typed broadcasts (bench/data/search_corpus.jsonl), the tuning half of the labelled type set
(bench/data/quality_types.jsonl, split as bench/analyzer_quality_content.py splits it) and the training-only
cases of bench/data/types_train_extra.jsonl (never judged). The held-out half never trains.

`python -m bench.type_set --write-train` rewrites the shipped file (a test checks it is current).
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import Any

from bench.safety_set import SEARCH_CORPUS, load_cases, split_of

ROOT = Path(__file__).resolve().parents[1]
TYPE_SET = ROOT / "bench" / "data" / "quality_types.jsonl"
EXTRA_TRAINING = ROOT / "bench" / "data" / "types_train_extra.jsonl"
TRAINING_FILE = ROOT / "pipeline" / "llm" / "local" / "data" / "types_train.jsonl"


def training_cases() -> list[dict[str, Any]]:
    corpus = [
        {"lang": row["lang"], "type": row["broadcast_type"], "text": row["content"], "source": "search_corpus"}
        for row in load_cases(SEARCH_CORPUS)
    ]
    tuning = [
        {"lang": case["lang"], "type": case["type"], "text": case["text"], "source": "tuning"}
        for case in load_cases(TYPE_SET)
        if split_of(case["text"]) == "tuning"
    ]
    extra = [{**case, "source": "extra"} for case in load_cases(EXTRA_TRAINING)]
    return corpus + tuning + extra


def training_lines() -> str:
    return "".join(json.dumps(case, ensure_ascii=False) + "\n" for case in training_cases())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write-train", action="store_true", help="rewrite the shipped training file")
    args = parser.parse_args()
    if args.write_train:
        TRAINING_FILE.write_text(training_lines(), encoding="utf-8")
    print(f"training cases: {dict(Counter(case['type'] for case in training_cases()))}")


if __name__ == "__main__":
    main()
