"""The search benchmarks' relevance labels (bench/data/README.md): the fixed tuning/held-out split of the
queries, a query's grade for a broadcast, and nDCG@10 — shared by search_quality.py (through the real
search API) and embedding_blend.py (the embedding alone, in-process)."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"
LANGS = ("en", "zh", "ja", "mixed")
SPLIT_SEED = 14  # fixed: which half of each language's queries is the tuning half


def load_jsonl(name: str) -> list[dict]:
    with (DATA / name).open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def tuning_half(queries: list[dict]) -> set[str]:
    """A random half of each language's queries (fixed seed), the ones looked at while tuning; the other half
    is reported separately as held out."""
    rng = random.Random(SPLIT_SEED)
    chosen: set[str] = set()
    for lang in LANGS:
        ids = sorted(query["id"] for query in queries if query["lang"] == lang)
        rng.shuffle(ids)
        chosen |= set(ids[: len(ids) // 2])
    return chosen


def doc_langs(doc: dict) -> set[str]:
    return {"en", doc["expected_lang"]} if doc["lang"] == "mixed" else {doc["lang"]}


def grade(query: dict, doc: dict) -> int:
    """The query's grade for a broadcast: its own entry, else its topic's; one step lower when the broadcast
    shares no language with the query (bench/data/README.md)."""
    grades = query["grades"]
    value = grades.get(doc["id"], grades.get(f"topic:{doc['topic']}", 0))
    if value and query["lang"] != "mixed" and query["lang"] not in doc_langs(doc):
        value -= 1
    return int(value)


def dcg(gains: list[int]) -> float:
    return sum((2**g - 1) / math.log2(rank + 2) for rank, g in enumerate(gains))


def ndcg10(query: dict, found: list[str], docs: dict[str, dict], indexed: set[str]) -> float:
    grades = {doc_id: grade(query, docs[doc_id]) for doc_id in indexed}
    ideal = dcg(sorted((g for g in grades.values() if g), reverse=True)[:10])
    return dcg([grades.get(doc_id, 0) for doc_id in found[:10]]) / ideal if ideal else 0.0
