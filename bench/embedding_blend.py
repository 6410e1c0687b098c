"""The local embedding's blend weights, measured in-process without the pipeline: every corpus broadcast and
query is embedded once into its parts (MiniLM of the text, hashed CJK bigrams, MiniLM of the English gloss
text), then each CJK_BLEND, with the model reading the raw text (as before the glossary) or the gloss
text, is scored by semantic nDCG@10 (cosine ranking above the
semantic floor, as semantic search does) per language, and by how many pairs of broadcasts from different
topics reach SIMILARITY_THRESHOLD (the similarity grouping's bar: each would be a false group) against how
many labelled near-duplicates do.

Tune on the tuning half of bench/data/search_queries.jsonl only (the default); --queries
search_queries_independent.jsonl reports the queries written apart from tuning, all of them.

    .venv/bin/python bench/embedding_blend.py [--queries FILE] [--all-queries] [--blends 0.7:text 0.2:gloss ...]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "eigenflux.settings")
os.environ.setdefault("LOG_LEVEL", "WARNING")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402

from bench.search_labels import LANGS, load_jsonl, ndcg10, tuning_half  # noqa: E402
from pipeline.llm.embeddings import SEMANTIC_FLOORS  # noqa: E402
from pipeline.llm.local import embedding, glossary, hashing, minilm  # noqa: E402

DEFAULT_BLENDS = ("0.7:text", "0.5:text", "0.3:text", "0.5:gloss", "0.4:gloss", "0.3:gloss", "0.2:gloss", "0.1:gloss")


def parts(texts: list[str]) -> dict[str, np.ndarray]:
    glosses = [glossary.gloss_text(text) for text in texts]
    model = minilm.model()
    gloss_rows = [row for row, gloss in enumerate(glosses) if gloss]
    gloss_vectors = np.zeros((len(texts), minilm.DIMENSIONS), dtype=np.float32)
    if gloss_rows:
        gloss_vectors[gloss_rows] = model.embed([glosses[row] for row in gloss_rows])
    bigram_vectors = np.asarray(
        [hashing.cjk_bigram_vector(text, minilm.DIMENSIONS) for text in texts], dtype=np.float32
    )
    bigram_vectors /= np.maximum(np.linalg.norm(bigram_vectors, axis=1, keepdims=True), 1e-12)
    return {
        "model": model.embed(texts),
        "bigrams": bigram_vectors,
        "gloss": gloss_vectors,
        "has_gloss": np.asarray([bool(g) for g in glosses]),
        "share": np.asarray([hashing.cjk_share(text) for text in texts], dtype=np.float32),
    }


def blend(p: dict[str, np.ndarray], cjk: float, read_gloss: bool) -> np.ndarray:
    """As pipeline.llm.local.embedding blends (read_gloss: the model reads the gloss text where there is one,
    as it does now; otherwise the raw text, as before the glossary)."""
    share = p["share"][:, None]
    model = np.where(p["has_gloss"][:, None], p["gloss"], p["model"]) if read_gloss else p["model"]
    vectors = np.sqrt(1.0 - cjk * share) * model + np.sqrt(cjk * share) * p["bigrams"]
    return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", default="search_queries.jsonl")
    parser.add_argument("--all-queries", action="store_true", help="every query, not only the tuning half")
    parser.add_argument(
        "--blends", nargs="*", default=DEFAULT_BLENDS, help="CJK_BLEND:text (raw text, as before) or :gloss"
    )
    args = parser.parse_args()
    docs = load_jsonl("search_corpus.jsonl")
    by_id = {doc["id"]: doc for doc in docs}
    queries = [query for query in load_jsonl(args.queries) if not query.get("nonsense")]
    if not args.all_queries:
        tune = tuning_half(queries)
        queries = [query for query in queries if query["id"] in tune]
    started = time.perf_counter()
    doc_parts = parts([doc["content"] for doc in docs])
    query_parts = parts([query["q"] for query in queries])
    print(f"embedded {len(docs)} broadcasts and {len(queries)} queries in {time.perf_counter() - started:.1f} s")
    floor, threshold = SEMANTIC_FLOORS["local:minilm"], settings.SIMILARITY_THRESHOLD
    topics = np.asarray([doc["topic"] for doc in docs])
    different = topics[:, None] != topics[None, :]
    upper = np.triu(np.ones_like(different), k=1)
    index = {doc["id"]: row for row, doc in enumerate(docs)}
    duplicates = [(index[d["id"]], index[d["duplicate_of"]]) for d in docs if "duplicate_of" in d]
    langs = [lang for lang in LANGS if any(q["lang"] == lang for q in queries)]
    print(f"{'cjk':>5}{'reads':>7}" + "".join(f"{lang:>8}" for lang in langs) + f"{'all':>8}{'false':>7}{'dups':>7}")
    for choice in args.blends:
        weight, reads = choice.split(":")
        cjk, read_gloss = float(weight), reads == "gloss"
        doc_vectors, query_vectors = blend(doc_parts, cjk, read_gloss), blend(query_parts, cjk, read_gloss)
        scores = query_vectors @ doc_vectors.T
        per: dict[str, list[float]] = defaultdict(list)
        for row, query in enumerate(queries):
            ranked = [docs[i]["id"] for i in np.argsort(-scores[row]) if scores[row, i] >= floor]
            value = ndcg10(query, ranked, by_id, set(by_id))
            per[query["lang"]].append(value)
            per["all"].append(value)
        cosine = doc_vectors @ doc_vectors.T
        false_pairs = int(((cosine >= threshold) & different & (upper > 0)).sum())
        same = int(((cosine >= threshold) & ~different & (upper > 0)).sum()) - sum(
            1 for a, b in duplicates if cosine[a, b] >= threshold
        )
        grouped = sum(1 for a, b in duplicates if cosine[a, b] >= threshold)
        cells = "".join(f"{np.mean(per[lang]):>8.3f}" for lang in (*langs, "all"))
        highest = float(cosine[different].max())
        print(f"{cjk:>5.2f}{reads:>7}{cells}{false_pairs:>7}{same:>6}{grouped:>4}/{len(duplicates)}{highest:>7.3f}")
    print("false: pairs of broadcasts from different topics at or above the grouping threshold; dups: labelled")
    print("near-duplicates that reach it; same: other pairs of one topic that reach it (translations of one")
    print("message); max: the highest cosine between broadcasts of different topics")
    print(f"semantic floor {floor}, grouping threshold {threshold}; configured: CJK_BLEND {embedding.CJK_BLEND}")


if __name__ == "__main__":
    main()
