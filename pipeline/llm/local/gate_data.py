"""The shipped data the learned gates (gates.py) are trained and evaluated on, and its precomputed features.

- data/safety_train.jsonl, data/spam_train.jsonl: the labelled training posts (the analyzer's own).
- data/gate_holdout.jsonl: the held-out halves of the labelled safety and spam sets (bench/data/safety.jsonl and
  quality_spam.jsonl, split by the first byte of each text's SHA-256, odd: held out), which nothing is trained or
  tuned on; `manage.py train_analyzer` compares a new model with the active one on them before it activates it.
- the development sets written apart (APART_SETS, in bench/data: posts written by people who never saw the analyzer,
  labelled by their writers; docs/benchmarks.md), which the gates train on at APART_WEIGHT each. The test sets
  written apart (safety_fresh6/7/8/11/15/16.jsonl) are never among them.
- data/gate_features.npz: for every text of those files, its e5 vector (float16) and out-of-fold n-gram
  estimates (each n-gram classifier refitted four times without the fold the text is in, so the gates learn
  how far to trust the n-grams on text they have not seen); for every written-apart development post, its safety, topic
  and stance estimates from layers trained without its set, and for every own training post from layers trained without
  its fold (gate_training.cross_fitted): the safety decision is fitted on them. Embedding ~7,100 posts costs about
  six minutes of CPU and the cross-fitting about ten, which is why they ship: training reads them and embeds only
  what is new (the moderators' posts).

    .venv/bin/python -m pipeline.llm.local.gate_data                 # rewrites gate_holdout.jsonl and gate_features.npz
    .venv/bin/python -m pipeline.llm.local.gate_data --keep-vectors  # the same, reusing the vectors of texts already
                                                                     # in the file (the e5 model unchanged)

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
# The twelfth to fourteenth joined on 7 December ("third round"), the seventeenth and eighteenth that night ("fourth
# round").
APART_SETS = tuple(
    BENCH_DATA / f"safety_fresh{number}.jsonl"
    for number in ("", "2", "3", "4", "5", "9", "10", "12", "13", "14", "17", "18")
)
APART_WEIGHT = 3.0
# The layers the written-apart sets teach: spam, stance and topic. The safety layer learns from the analyzer's own
# posts and the moderators' decisions only: trained on the written-apart sets too it read explicit harm less surely (a
# murder for hire at 0.85, held instead of blocked), a marketplace restock notice as unsafe, and moderators' rejections
# moved it less; the stance layer passes nearly as many safe-but-edgy posts without those costs. The topic layer (harm
# at all, whatever the stance) joined with the learned decision (docs/analyzer-learning.md, "A learned decision").
APART_LAYERS = ("spam", "stance", "topic")
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


def build_features(keep_vectors: bool = False) -> dict[str, np.ndarray]:
    """The features file's arrays (see the module docstring). `keep_vectors`: reuse the stored vectors of texts the
    file already has."""
    from pipeline import gate_training

    safety_cases, spam_cases = read_jsonl(SAFETY_TRAIN), read_jsonl(SPAM_TRAIN)
    texts = sorted({case["text"] for case in (*safety_cases, *spam_cases, *read_jsonl(HOLDOUT), *apart_cases())})
    oof_safety = _out_of_fold(safety_cases, safety_classifier.train, lambda model, text: model.risk(text)[0])
    oof_spam = _out_of_fold(spam_cases, spam_classifier.train, lambda model, text: model.probability(text))
    full_safety, full_spam = safety_classifier.classifier(), spam_classifier.classifier()
    stored = load_features() if keep_vectors and FEATURES.exists() else {}
    missing = [text for text in texts if text_key(text) not in stored]
    found = [vector for at in range(0, len(missing), 64) for vector in e5.vectors(missing[at : at + 64])]
    embedded = dict(zip(missing, found, strict=True))
    vectors = np.array([embedded[t] if t in embedded else stored[text_key(t)][0] for t in texts], dtype=np.float32)
    arrays = {
        "key": np.array([text_key(text) for text in texts]),
        "vector": vectors.astype(np.float16),
        "ngram_safety": np.array([oof_safety.get(t, full_safety.risk(t)[0]) for t in texts], dtype=np.float32),
        "ngram_spam": np.array([oof_spam.get(t, full_spam.probability(t)) for t in texts], dtype=np.float32),
    }
    # The layers are cross-fitted on the features as stored (float16 vectors), as training will read them.
    cross = gate_training.cross_fitted(_by_key(arrays))
    for column, name in enumerate(("safety", "topic", "stance")):
        arrays[f"cross_{name}"] = np.array([cross.get(t, (np.nan,) * 3)[column] for t in texts], dtype=np.float32)
    return arrays


def load_features(path: Path = FEATURES) -> dict[str, tuple[np.ndarray, float, float]]:
    """text key -> (vector, out-of-fold n-gram safety estimate, spam estimate)."""
    with np.load(path, allow_pickle=False) as stored:
        return _by_key({name: stored[name] for name in ("key", "vector", "ngram_safety", "ngram_spam")})


def _by_key(arrays: dict[str, np.ndarray]) -> dict[str, tuple[np.ndarray, float, float]]:
    vectors, safety, spam = arrays["vector"].astype(np.float32), arrays["ngram_safety"], arrays["ngram_spam"]
    return {str(key): (vectors[row], float(safety[row]), float(spam[row])) for row, key in enumerate(arrays["key"])}


def load_cross_fitted(path: Path = FEATURES) -> dict[str, tuple[float, float, float, float]]:
    """text key -> (cross-fitted safety, topic and stance estimates, n-gram safety estimate), for the written-apart
    development posts and the analyzer's own training posts (gate_training.cross_fitted)."""
    with np.load(path, allow_pickle=False) as stored:
        keys, ngram = stored["key"], stored["ngram_safety"]
        safety, topic, stance = stored["cross_safety"], stored["cross_topic"], stored["cross_stance"]
    return {
        str(key): (float(safety[row]), float(topic[row]), float(stance[row]), float(ngram[row]))
        for row, key in enumerate(keys)
        if not np.isnan(topic[row])
    }


def write(keep_vectors: bool = False) -> None:
    HOLDOUT.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in holdout_from_bench()), "utf-8")
    arrays = build_features(keep_vectors)
    np.savez_compressed(FEATURES, **arrays)  # type: ignore[arg-type]  # numpy's stub reads the first keyword as allow_pickle


if __name__ == "__main__":
    import os
    import sys

    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "eigenflux.settings")
    django.setup()
    write(keep_vectors="--keep-vectors" in sys.argv[1:])
    print(f"wrote {HOLDOUT} and {FEATURES}")
