"""The training files of the local analyzer's learned content layers, made from the labelled sets' tuning halves
(split as bench/analyzer_quality_content.py splits them) and training-only cases that no bench judges. The
held-out halves never train.

- spam (pipeline/llm/local/data/spam_train.jsonl): the tuning half of bench/data/quality_spam.jsonl, the
  training-only cases of bench/data/spam_train_extra.jsonl, and as ordinary posts the search corpus's broadcasts
  and the safe posts the safety model trains on (edgy and normal: security news, harm reduction, horror-game
  reviews; short Chinese and Japanese posts without figures are not spam).
- types (pipeline/llm/local/data/types_train.jsonl): the search corpus's typed broadcasts, the tuning half of
  bench/data/quality_types.jsonl and the training-only posts of bench/data/types_train_extra.jsonl.

`python -m bench.content_sets --write-train` rewrites both shipped files (tests check they are current);
`--cv` prints the learned spam model's five-fold cross-validation on its training file (shuffled with a fixed
seed): the share of spam and of ordinary posts it reads as bait (probability from LEARNED_BAIT_THRESHOLD).
"""

from __future__ import annotations

import argparse
import random
from collections import Counter
from pathlib import Path
from typing import Any

from bench import safety_set
from bench.safety_set import SEARCH_CORPUS, load_cases, split_of

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "bench" / "data"
SHIPPED = ROOT / "pipeline" / "llm" / "local" / "data"
SPAM_SET, SPAM_EXTRA, SPAM_FILE = (
    DATA / "quality_spam.jsonl",
    DATA / "spam_train_extra.jsonl",
    SHIPPED / "spam_train.jsonl",
)
TYPE_SET, TYPE_EXTRA, TYPE_FILE = (
    DATA / "quality_types.jsonl",
    DATA / "types_train_extra.jsonl",
    SHIPPED / "types_train.jsonl",
)


def _tuning(path: Path, field: str) -> list[dict[str, Any]]:
    return [
        {"lang": case["lang"], field: case[field], "text": case["text"], "source": "tuning"}
        for case in load_cases(path)
        if split_of(case["text"]) == "tuning"
    ]


def _extra(path: Path) -> list[dict[str, Any]]:
    return [{**case, "source": "extra"} for case in load_cases(path)]


def spam_cases() -> list[dict[str, Any]]:
    ordinary = [
        {"lang": row["lang"], "label": "normal", "text": row["content"], "source": "search_corpus"}
        for row in load_cases(SEARCH_CORPUS)
    ]
    safe = [
        {"lang": case["lang"], "label": "normal", "text": case["text"], "source": f"safety_{case['label']}"}
        for case in safety_set.half("tuning") + load_cases(safety_set.EXTRA_TRAINING)
        if case["label"] in {"edgy", "normal"}
    ]
    return _tuning(SPAM_SET, "label") + _extra(SPAM_EXTRA) + ordinary + safe


def type_cases() -> list[dict[str, Any]]:
    corpus = [
        {"lang": row["lang"], "type": row["broadcast_type"], "text": row["content"], "source": "search_corpus"}
        for row in load_cases(SEARCH_CORPUS)
    ]
    return corpus + _tuning(TYPE_SET, "type") + _extra(TYPE_EXTRA)


lines = safety_set.jsonl  # the shipped files' format, shared with the safety model's


def spam_cross_validation(cases: list[dict[str, Any]], folds: int = 5, seed: int = 7) -> None:
    """Per language and in all: how much spam, and how many ordinary posts, the model reads as bait when each
    fold is judged by a model trained on the others."""
    from pipeline.llm.local.quality import LEARNED_BAIT_THRESHOLD
    from pipeline.llm.local.spam_classifier import train

    shuffled = list(cases)
    random.Random(seed).shuffle(shuffled)
    counts: Counter[tuple[str, str, bool]] = Counter()
    for fold in range(folds):
        model = train([case for k, case in enumerate(shuffled) if k % folds != fold])
        for case in shuffled[fold::folds]:
            flagged = model.probability(case["text"]) >= LEARNED_BAIT_THRESHOLD
            for lang in (case["lang"], "all"):
                counts[(lang, case["label"], flagged)] += 1
    print(f"five-fold, read as bait at p >= {LEARNED_BAIT_THRESHOLD}:  lang  spam kept  ordinary flagged")
    for lang in ("en", "zh", "ja", "all"):
        shares = [
            counts[(lang, label, True)] / max(1, counts[(lang, label, True)] + counts[(lang, label, False)])
            for label in ("spam", "normal")
        ]
        print(f"  {lang:<4} {shares[0]:.2f}  {shares[1]:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write-train", action="store_true", help="rewrite the shipped training files")
    parser.add_argument("--cv", action="store_true", help="cross-validate the learned spam model")
    args = parser.parse_args()
    if args.cv:
        import os

        import django

        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "eigenflux.settings")
        django.setup()
        spam_cross_validation(spam_cases())
        return
    for path, cases, field in ((SPAM_FILE, spam_cases(), "label"), (TYPE_FILE, type_cases(), "type")):
        if args.write_train:
            path.write_text(lines(cases), encoding="utf-8")
        print(f"{path.name}: {dict(Counter(case[field] for case in cases))}")


if __name__ == "__main__":
    main()
