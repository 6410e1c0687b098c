"""The labelled safety set (bench/data/safety.jsonl) and its deterministic split: a tuning half, which the local
classifier trains on (shipped as pipeline/llm/local/data/safety_train.jsonl) and the rules are tuned against, and
a held-out half that nothing trains or is tuned on. The training file adds every broadcast of the search corpus
(bench/data/search_corpus.jsonl, ordinary posts written for the search benchmark) as a normal example, so
that text unlike anything in the tuning half reads as safe by default.

`python -m bench.safety_set --write-train` rewrites the shipped training file from the tuning half;
`python -m bench.safety_set --write-embedding-model` retrains the safety check's embedding layer on that file
and writes pipeline/llm/local/data/safety_embedding.json (with the file's SHA-256; a test checks it is current).
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SAFETY_SET = ROOT / "bench" / "data" / "safety.jsonl"
SEARCH_CORPUS = ROOT / "bench" / "data" / "search_corpus.jsonl"
# Training-only cases written for the learned layers (bench/data/README.md): not part of the labelled set, so
# not split and never judged by the bench; all of them train.
EXTRA_TRAINING = ROOT / "bench" / "data" / "safety_train_extra.jsonl"
# Written apart from both, never trained on: the development set the learned layers' settings were chosen on.
PROBE_SET = ROOT / "bench" / "data" / "safety_probe.jsonl"
TRAINING_FILE = ROOT / "pipeline" / "llm" / "local" / "data" / "safety_train.jsonl"


def split_of(text: str) -> str:
    """ "tuning" or "heldout", by a stable hash of the text (the same on every machine and run)."""
    return "tuning" if hashlib.sha256(text.encode("utf-8")).digest()[0] % 2 == 0 else "heldout"


def load_cases(path: Path = SAFETY_SET) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def half(name: str) -> list[dict[str, Any]]:
    return [case for case in load_cases() if split_of(case["text"]) == name]


def training_cases() -> list[dict[str, Any]]:
    ordinary = [
        {
            "lang": row["lang"],
            "label": "normal",
            "category": "normal",
            "text": row["content"],
            "source": "search_corpus",
        }
        for row in load_cases(SEARCH_CORPUS)
    ]
    extra = [{**case, "source": "extra"} for case in load_cases(EXTRA_TRAINING)]
    return half("tuning") + extra + ordinary


def jsonl(cases: list[dict[str, Any]]) -> str:
    """Cases as a training file's text: one JSON object per line."""
    return "".join(json.dumps(case, ensure_ascii=False) + "\n" for case in cases)


def training_lines() -> str:
    return jsonl(training_cases())


def write_embedding_model() -> None:
    import os
    import sys

    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "eigenflux.settings")
    import django

    django.setup()
    from pipeline.llm.local import safety_embedding

    fitted = safety_embedding.write_model()
    print(f"wrote {safety_embedding.WEIGHTS_PATH.relative_to(ROOT)}; blend {[round(v, 3) for v in fitted.blend]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write-train", action="store_true", help="rewrite the shipped training file")
    parser.add_argument(
        "--write-embedding-model", action="store_true", help="retrain and write the embedding layer's weights"
    )
    args = parser.parse_args()
    if args.write_train:
        TRAINING_FILE.write_text(training_lines(), encoding="utf-8")
    if args.write_embedding_model:
        write_embedding_model()
    halves = [split_of(case["text"]) for case in load_cases()]
    print(f"tuning {halves.count('tuning')}, held-out {halves.count('heldout')}")


if __name__ == "__main__":
    main()
