"""Cross-validated safety figures on the tuning half only, for tuning without touching the held-out half: the
tuning half is cut into four folds; for each, the learned layer is trained on the other three (plus the
ordinary search-corpus posts and the training-only cases, as shipped) and the whole check (rules and
classifier) judges the fold. Prints
unsafe blocked, safe-but-edgy passed and normal passed per language, and with --show the misses.

    .venv/bin/python -m bench.safety_cv [--show] [--unsupported 0.5] [--embedding-threshold 0.9 ...]
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

from django.conf import settings  # noqa: E402
from django.test import override_settings  # noqa: E402

from bench.safety_set import half, training_cases  # noqa: E402
from pipeline.llm.local import safety, safety_embedding  # noqa: E402
from pipeline.llm.local.safety_classifier import train  # noqa: E402

FOLDS = 4


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
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
        print(f"\nSAFETY_LOCAL_EMBEDDING_BLOCK_THRESHOLD={threshold}")
        with override_settings(SAFETY_LOCAL_EMBEDDING_BLOCK_THRESHOLD=threshold):
            _report(_judge_folds(args.show))


def _judge_folds(show: bool) -> dict[tuple[str, str], list[int]]:
    """Each fold of the tuning half judged by both learned layers trained on the other three and the ordinary
    posts (models are cached across calls: the thresholds compared share them)."""
    tuning = half("tuning")
    counts: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for fold in range(FOLDS):
        judged = tuning[fold::FOLDS]
        model, layer = _fold_models(fold)
        safety.classifier = lambda model=model: model  # type: ignore[assignment]
        safety_embedding.model = lambda layer=layer: layer  # type: ignore[assignment]
        for case in judged:
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


_MODELS: dict[int, tuple[Any, safety_embedding.EmbeddingSafetyModel]] = {}


def _fold_models(fold: int) -> tuple[Any, safety_embedding.EmbeddingSafetyModel]:
    if fold not in _MODELS:
        tuning = half("tuning")
        ordinary = [case for case in training_cases() if case.get("source") in ("search_corpus", "extra")]
        rest = [case for index, case in enumerate(tuning) if index % FOLDS != fold] + ordinary
        _MODELS[fold] = (train(rest), safety_embedding.train(rest, safety_embedding.training_vectors(rest)))
    return _MODELS[fold]


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
