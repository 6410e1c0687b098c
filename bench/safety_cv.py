"""Cross-validated safety figures without touching the held-out half, in folds of four, both learned layers retrained
on the rest for each fold (as shipped: the other folds plus every other training case) and the whole check
(rules, classifier, embedding blend) judging the fold. Two sets can be judged so:

- `--set tuning` (the default): the labelled tuning half;
- `--set extra`: the training-only cases (bench/data/safety_train_extra.jsonl), written in three passes by other
  hands and with other phrasings than the labelled set, so a fold of them reads like text the check never saw.

Prints unsafe blocked, safe-but-edgy passed and normal passed per language, and with --show the misses.

    .venv/bin/python -m bench.safety_cv [--set extra] [--show] [--unsupported 0.5] [--embedding-threshold 0.9 ...]
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "eigenflux.settings")
os.environ["LLM_PROVIDER"] = "local"

import django

django.setup()

import numpy as np  # noqa: E402
from django.conf import settings  # noqa: E402
from django.test import override_settings  # noqa: E402

from bench.safety_set import training_cases  # noqa: E402
from pipeline.llm.local import safety, safety_embedding  # noqa: E402
from pipeline.llm.local.safety_classifier import train  # noqa: E402

FOLDS = 4
SOURCES = {"tuning": None, "extra": "extra"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--set", choices=sorted(SOURCES), default="tuning", help="the cases judged in folds")
    parser.add_argument("--show", action="store_true", help="print every case judged wrongly")
    parser.add_argument("--unsupported", type=float, help="UNSUPPORTED_LEARNED_RISK for this run")
    parser.add_argument(
        "--embedding-threshold",
        type=float,
        action="append",
        help="SAFETY_LOCAL_EMBEDDING_BLOCK_THRESHOLD values to compare (1.0: the layer off); default the setting",
    )
    args = parser.parse_args()
    if args.unsupported is not None:
        safety.UNSUPPORTED_LEARNED_RISK = args.unsupported
    for threshold in args.embedding_threshold or [settings.SAFETY_LOCAL_EMBEDDING_BLOCK_THRESHOLD]:
        print(f"\n{args.set}: SAFETY_LOCAL_EMBEDDING_BLOCK_THRESHOLD={threshold}")
        with override_settings(SAFETY_LOCAL_EMBEDDING_BLOCK_THRESHOLD=threshold):
            _report(_judge_folds(SOURCES[args.set], args.show))


def _judged(source: str | None) -> list[dict[str, Any]]:
    return [case for case in training_cases() if case.get("source") == source]


def _judge_folds(source: str | None, show: bool) -> dict[tuple[str, str], list[int]]:
    """Each fold of the set judged by both learned layers trained without it (models are cached across calls:
    the thresholds compared share them)."""
    counts: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    judged_set = _judged(source)
    for fold in range(FOLDS):
        model, layer = _fold_models(source, fold)
        safety.classifier = lambda model=model: model  # type: ignore[assignment]
        safety_embedding.model = lambda layer=layer: layer  # type: ignore[assignment]
        for case in judged_set[fold::FOLDS]:
            verdict = safety.safety_verdict(content=case["text"])
            right = (not verdict.safe) == (case["label"] == "unsafe")
            for lang in (case["lang"], "all"):
                counts[(lang, case["label"])][0] += right
                counts[(lang, case["label"])][1] += 1
            if show and not right:
                print(
                    f"miss {case['lang']} {case['label']}/{case['category']} risk={verdict.risk} {case['text'][:110]}"
                )
    return counts


_MODELS: dict[tuple[str | None, int], tuple[Any, safety_embedding.EmbeddingSafetyModel]] = {}
_VECTORS: dict[str, np.ndarray] = {}


def _fold_models(source: str | None, fold: int) -> tuple[Any, safety_embedding.EmbeddingSafetyModel]:
    if (source, fold) not in _MODELS:
        cases = training_cases()
        judged_set = _judged(source)
        left_out = {id(case) for case in judged_set[fold::FOLDS]}
        rest = [case for case in cases if id(case) not in left_out]
        missing = [case for case in cases if case["text"] not in _VECTORS]
        if missing:
            texts = [case["text"] for case in missing]
            _VECTORS.update(zip(texts, safety_embedding.training_vectors(missing), strict=True))
        vectors = np.array([_VECTORS[case["text"]] for case in rest])
        _MODELS[(source, fold)] = (train(rest), safety_embedding.train(rest, vectors))
    return _MODELS[(source, fold)]


def _report(counts: dict[tuple[str, str], list[int]]) -> None:
    print(f"{'lang':<6}{'unsafe blocked':>18}{'edgy passed':>16}{'normal passed':>16}")
    for lang in ("en", "zh", "ja", "all"):
        cells = []
        for label in ("unsafe", "edgy", "normal"):
            right, total = counts[(lang, label)]
            cells.append(f"{right / total:.2f} ({right}/{total})" if total else "-")
        print(f"{lang:<6}{cells[0]:>18}{cells[1]:>16}{cells[2]:>16}")


if __name__ == "__main__":
    main()
