"""Cross-validated safety figures on the tuning half only, for tuning without touching the held-out half: the
tuning half is cut into four folds; for each, the learned layer is trained on the other three (plus the
ordinary search-corpus posts, as shipped) and the whole check (rules and classifier) judges the fold. Prints
unsafe blocked, safe-but-edgy passed and normal passed per language, and with --show the misses.

    .venv/bin/python -m bench.safety_cv [--show] [--unsupported 0.5]
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "eigenflux.settings")
os.environ["LLM_PROVIDER"] = "local"

import django

django.setup()

from bench.safety_set import half, training_cases  # noqa: E402
from pipeline.llm.local import safety  # noqa: E402
from pipeline.llm.local.safety_classifier import train  # noqa: E402

FOLDS = 4


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--show", action="store_true", help="print every case judged wrongly")
    parser.add_argument("--unsupported", type=float, help="UNSUPPORTED_LEARNED_RISK for this run")
    args = parser.parse_args()
    if args.unsupported is not None:
        safety.UNSUPPORTED_LEARNED_RISK = args.unsupported
    tuning = half("tuning")
    ordinary = [case for case in training_cases() if case.get("source") == "search_corpus"]
    counts: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for fold in range(FOLDS):
        judged = tuning[fold::FOLDS]
        rest = [case for index, case in enumerate(tuning) if index % FOLDS != fold]
        model = train(rest + ordinary)
        safety.classifier = lambda model=model: model  # type: ignore[assignment]
        for case in judged:
            verdict = safety.safety_verdict(content=case["text"])
            right = (not verdict.safe) == (case["label"] == "unsafe")
            for lang in (case["lang"], "all"):
                counts[(lang, case["label"])][0] += right
                counts[(lang, case["label"])][1] += 1
            if args.show and not right:
                print(
                    f"miss {case['lang']} {case['label']}/{case['category']} risk={verdict.risk} {case['text'][:110]}"
                )
    print(f"{'lang':<6}{'unsafe blocked':>18}{'edgy passed':>16}{'normal passed':>16}")
    for lang in ("en", "zh", "ja", "all"):
        cells = []
        for label in ("unsafe", "edgy", "normal"):
            right, total = counts[(lang, label)]
            cells.append(f"{right / total:.2f} ({right}/{total})" if total else "-")
        print(f"{lang:<6}{cells[0]:>18}{cells[1]:>16}{cells[2]:>16}")


if __name__ == "__main__":
    main()
