"""CPU per item of the offline analyzer's whole judgment of a broadcast, the part the pipeline runs for each
item: embedding (the meaning model's share: with LOCAL_EMBEDDING=e5 the learned gates of the safety and
extraction steps read the vector it computed), safety verdict and extraction, on the 326 broadcasts of the
search corpus, one item per call.
Reports process CPU time (not wall time, so other load on the machine distorts it less) per item and per step,
after a first pass that loads every model and dictionary (reported apart).

    .venv/bin/python bench/analyzer_cpu.py [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "eigenflux.settings")
os.environ["LLM_PROVIDER"] = "local"
os.environ.setdefault("LOG_LEVEL", "WARNING")

import django  # noqa: E402

django.setup()

from pipeline.llm import local  # noqa: E402
from pipeline.llm.local import e5, minilm  # noqa: E402

STEPS = {
    "embed": lambda text: local.embed_texts([text], minilm.DIMENSIONS),
    "safety": lambda text: local.safety_verdict(content=text),
    "extract": lambda text: local.extract(content=text),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    corpus = ROOT / "bench" / "data" / "search_corpus.jsonl"
    texts = [json.loads(line)["content"] for line in corpus.read_text(encoding="utf-8").splitlines() if line]
    started = time.process_time()
    for step in STEPS.values():
        for text in texts[:3] + [text for text in texts if not text.isascii()][:3]:
            step(text)
    print(f"first use (models, dictionaries, classifier training): {time.process_time() - started:.2f} s CPU")
    spent = dict.fromkeys(STEPS, 0.0)
    for _ in range(args.rounds):
        # Each round embeds every text anew, as the pipeline embeds each new item once (the safety and extraction
        # steps then read its vector from the cache, as in the pipeline).
        e5._cache.clear()
        for text in texts:
            for name, step in STEPS.items():
                started = time.process_time()
                step(text)
                spent[name] += time.process_time() - started
    count = len(texts) * args.rounds
    for name, seconds in spent.items():
        print(f"{name:<8}{seconds * 1000 / count:>8.2f} ms CPU per item")
    print(f"{'total':<8}{sum(spent.values()) * 1000 / count:>8.2f} ms CPU per item ({count} items)")


if __name__ == "__main__":
    main()
