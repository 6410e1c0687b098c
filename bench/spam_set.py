"""The local spam model's training file (pipeline/llm/local/data/spam_train.jsonl): the tuning half of the
labelled spam set (bench/data/quality_spam.jsonl, split as bench/analyzer_quality_content.py splits it), the
training-only cases of bench/data/spam_train_extra.jsonl (never judged), and as ordinary posts the search
corpus's broadcasts and the safe posts the safety model trains on (edgy and normal: security news, harm
reduction, horror-game reviews; short Chinese and Japanese posts without figures are not spam). The held-out
halves never train.

`python -m bench.spam_set --write-train` rewrites the shipped file (a test checks it is current).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from bench import safety_set
from bench.safety_set import SEARCH_CORPUS, load_cases, split_of

ROOT = Path(__file__).resolve().parents[1]
SPAM_SET = ROOT / "bench" / "data" / "quality_spam.jsonl"
EXTRA_TRAINING = ROOT / "bench" / "data" / "spam_train_extra.jsonl"
TRAINING_FILE = ROOT / "pipeline" / "llm" / "local" / "data" / "spam_train.jsonl"


def training_cases() -> list[dict[str, Any]]:
    tuning = [
        {"lang": case["lang"], "label": case["label"], "text": case["text"], "source": "tuning"}
        for case in load_cases(SPAM_SET)
        if split_of(case["text"]) == "tuning"
    ]
    extra = [{**case, "source": "extra"} for case in load_cases(EXTRA_TRAINING)]
    ordinary = [
        {"lang": row["lang"], "label": "normal", "text": row["content"], "source": "search_corpus"}
        for row in load_cases(SEARCH_CORPUS)
    ]
    safe = [
        {"lang": case["lang"], "label": "normal", "text": case["text"], "source": f"safety_{case['label']}"}
        for case in safety_set.half("tuning") + load_cases(safety_set.EXTRA_TRAINING)
        if case["label"] in {"edgy", "normal"}
    ]
    return tuning + extra + ordinary + safe


def training_lines() -> str:
    return "".join(json.dumps(case, ensure_ascii=False) + "\n" for case in training_cases())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write-train", action="store_true", help="rewrite the shipped training file")
    args = parser.parse_args()
    if args.write_train:
        TRAINING_FILE.write_text(training_lines(), encoding="utf-8")
    counts: dict[str, int] = {}
    for case in training_cases():
        counts[case["label"]] = counts.get(case["label"], 0) + 1
    print(f"training cases: {counts}")


if __name__ == "__main__":
    main()
