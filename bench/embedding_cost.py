"""CPU per item of the local embedding, with and without the CJK glossary, on the labelled corpus: each
broadcast embedded alone (as the pipeline embeds one item), both variants interleaved in the same process so
machine load hits them alike; median over rounds, per language. "without" is the embedding before the
glossary (MiniLM and CJK bigrams only); the glossary's one-off load (dictionary parsing) is reported apart.

    .venv/bin/python bench/embedding_cost.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "eigenflux.settings")
os.environ.setdefault("LOG_LEVEL", "WARNING")

import django  # noqa: E402

django.setup()

from bench.search_labels import load_jsonl  # noqa: E402
from pipeline.llm.local import embedding, glossary, minilm  # noqa: E402


def rss_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as handle:
        return next(int(line.split()[1]) / 1024 for line in handle if line.startswith("VmRSS:"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    docs = load_jsonl("search_corpus.jsonl")
    minilm.model().embed(["warm up"])
    before = rss_mb()
    started = time.perf_counter()
    glossary.glossary()
    load_s, load_mb = time.perf_counter() - started, rss_mb() - before
    real_gloss = glossary.gloss_text
    timings: dict[tuple[str, str], list[float]] = defaultdict(list)
    for _ in range(args.rounds):
        for doc in docs:
            for variant in ("without", "with"):
                glossary.gloss_text = real_gloss if variant == "with" else (lambda _text: "")  # type: ignore[assignment]
                started = time.perf_counter()
                embedding.embed_texts([doc["content"]], minilm.DIMENSIONS)
                elapsed = (time.perf_counter() - started) * 1000
                timings[(variant, doc["lang"])].append(elapsed)
                timings[(variant, "all")].append(elapsed)
    glossary.gloss_text = real_gloss  # type: ignore[assignment]
    print(f"glossary load: {load_s:.2f} s once per process, +{load_mb:.0f} MB RSS")
    print(f"{'lang':<7}{'items':>6}{'without ms':>12}{'with ms':>10}{'added ms':>10}")
    for lang in ("en", "zh", "ja", "mixed", "all"):
        without = statistics.median(timings[("without", lang)])
        with_gloss = statistics.median(timings[("with", lang)])
        count = len(timings[("with", lang)]) // args.rounds
        print(f"{lang:<7}{count:>6}{without:>12.2f}{with_gloss:>10.2f}{with_gloss - without:>10.2f}")
    print("median ms per item, one item per call")


if __name__ == "__main__":
    main()
