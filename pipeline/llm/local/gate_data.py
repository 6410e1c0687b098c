"""The shipped data the learned gates (gates.py) are trained and evaluated on, and its precomputed features.

- data/safety_train.jsonl, data/spam_train.jsonl: the labelled training posts (the analyzer's own).
- data/gate_holdout.jsonl: the held-out halves of the labelled safety and spam sets (bench/data/safety.jsonl and
  quality_spam.jsonl, split by the first byte of each text's SHA-256, odd: held out), which nothing is trained or
  tuned on; `manage.py train_analyzer` compares a new model with the active one on them before it activates it.
- the development sets written apart (APART_SETS, in bench/data: posts written by people who never saw the analyzer,
  labelled by their writers; docs/benchmarks.md), which the gates train on at APART_WEIGHT each. The test sets
  written apart (safety_fresh6/7/8/11/15.jsonl) are never among them.
- data/gate_features.npz: for every text of those files, its e5 vector (float16) and out-of-fold n-gram
  estimates (each n-gram classifier refitted four times without the fold the text is in, so the gates learn
  how far to trust the n-grams on text they have not seen). Embedding ~7,100 posts costs about six minutes of
  CPU, which is why they ship: training reads them and embeds only what is new (the moderators' posts).

    .venv/bin/python -m pipeline.llm.local.gate_data    # rewrites gate_holdout.jsonl and gate_features.npz

A test checks that the features file covers exactly these texts (tests/pipeline/llm/test_gates.py).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from pipeline.llm.local import e5, safety_classifier, spam_classifier

DATA = Path(__file__).resolve().parent / "data"
SAFETY_TRAIN = DATA / "safety_train.jsonl"
SPAM_TRAIN = DATA / "spam_train.jsonl"
HOLDOUT = DATA / "gate_holdout.jsonl"
FEATURES = DATA / "gate_features.npz"
BENCH_DATA = Path(__file__).resolve().parents[3] / "bench" / "data"
# The written-apart development sets the gates learn from, and the weight of each of their posts. The weight was chosen
# on the ninth and tenth sets, each held out in turn while the gates trained on the others (docs/analyzer-learning.md,
# "Labels written apart, second round"): weights 1, 3, 10 and 30 were within two posts of each other on every figure.
# The twelfth to fourteenth joined on 7 December ("third round").
APART_SETS = tuple(
    BENCH_DATA / f"safety_fresh{number}.jsonl" for number in ("", "2", "3", "4", "5", "9", "10", "12", "13", "14")
)
APART_WEIGHT = 3.0
# The layers the written-apart sets teach: spam and stance. The safety layer learns from the analyzer's own posts and
# the moderators' decisions only: trained on the written-apart sets too it read explicit harm less surely (a murder
# for hire at 0.85, held instead of blocked), a marketplace restock notice as unsafe, and moderators' rejections
# moved it less; the stance layer passes nearly as many safe-but-edgy posts without those costs.
APART_LAYERS = ("spam", "stance")
FOLDS = 4
M = TypeVar("M")


def text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def apart_cases() -> list[dict[str, Any]]:
    """The written-apart development sets' posts (lang, label, category, kind, text), in APART_SETS order."""
    return [case for path in APART_SETS for case in read_jsonl(path)]


def holdout_from_bench() -> list[dict[str, Any]]:
    """The held-out halves of bench/data/safety.jsonl and quality_spam.jsonl, labels as written."""
    rows = []
    for name, gate in (("safety.jsonl", "safety"), ("quality_spam.jsonl", "spam")):
        for case in read_jsonl(BENCH_DATA / name):
            if hashlib.sha256(case["text"].encode("utf-8")).digest()[0] % 2 == 1:
                rows.append({"gate": gate, "lang": case.get("lang", ""), "label": case["label"], "text": case["text"]})
    return rows


def _out_of_fold(
    cases: list[dict[str, Any]], train: Callable[[list[dict[str, Any]]], M], score: Callable[[M, str], float]
) -> dict[str, float]:
    """Each training text's estimate from the model refitted without its fold."""
    found: dict[str, float] = {}
    for fold in range(FOLDS):
        rest = [case for row, case in enumerate(cases) if row % FOLDS != fold]
        fitted = train(rest)
        for row in range(fold, len(cases), FOLDS):
            found[cases[row]["text"]] = score(fitted, cases[row]["text"])
    return found


def build_features() -> dict[str, np.ndarray]:
    """The features file's arrays (see the module docstring)."""
    safety_cases, spam_cases = read_jsonl(SAFETY_TRAIN), read_jsonl(SPAM_TRAIN)
    texts = sorted({case["text"] for case in (*safety_cases, *spam_cases, *read_jsonl(HOLDOUT), *apart_cases())})
    oof_safety = _out_of_fold(safety_cases, safety_classifier.train, lambda model, text: model.risk(text)[0])
    oof_spam = _out_of_fold(spam_cases, spam_classifier.train, lambda model, text: model.probability(text))
    full_safety, full_spam = safety_classifier.classifier(), spam_classifier.classifier()
    vectors = np.concatenate([e5.vectors(texts[start : start + 64]) for start in range(0, len(texts), 64)])
    return {
        "key": np.array([text_key(text) for text in texts]),
        "vector": vectors.astype(np.float16),
        "ngram_safety": np.array([oof_safety.get(t, full_safety.risk(t)[0]) for t in texts], dtype=np.float32),
        "ngram_spam": np.array([oof_spam.get(t, full_spam.probability(t)) for t in texts], dtype=np.float32),
    }


def load_features(path: Path = FEATURES) -> dict[str, tuple[np.ndarray, float, float]]:
    """text key -> (vector, out-of-fold n-gram safety estimate, spam estimate)."""
    with np.load(path, allow_pickle=False) as stored:
        keys, vectors = stored["key"], stored["vector"].astype(np.float32)
        safety, spam = stored["ngram_safety"], stored["ngram_spam"]
    return {str(key): (vectors[row], float(safety[row]), float(spam[row])) for row, key in enumerate(keys)}


def write() -> None:
    HOLDOUT.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in holdout_from_bench()), "utf-8")
    arrays = build_features()
    np.savez_compressed(
        FEATURES,
        key=arrays["key"],
        vector=arrays["vector"],
        ngram_safety=arrays["ngram_safety"],
        ngram_spam=arrays["ngram_spam"],
    )


if __name__ == "__main__":
    import os

    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "eigenflux.settings")
    django.setup()
    write()
    print(f"wrote {HOLDOUT} and {FEATURES}")
