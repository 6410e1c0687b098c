"""The rate of `manage.py reembed_items` with a local embedding (`--embedding e5`, the default one, or `minilm`):
items per second per process and CPU milliseconds per item, with one process and with several, and the time that
projects for 1M items.

A scratch database gets `--items` completed items (the labelled corpus's texts with a distinct suffix each, so no
two are the same text) stamped as another model's vectors; each configuration re-stamps them all and runs the
command as an operator would (a subprocess), reading its final lines. The database is dropped at the end.

    flock /tmp/eigenflux-bench.lock .venv/bin/python bench/reembed_rate.py [--items 3000] [--processes 1,2]
        [--embedding e5|minilm]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
for name in ("LLM_API_KEY", "OPENAI_API_KEY"):
    os.environ.pop(name, None)

from bench.scratch import scratch_drop, scratch_environment  # noqa: E402

SCRATCH_DB = "bench_eigenflux_reembed"
OLD = "bench:old-model:384"
PROCESS_LINE = re.compile(r"process (\d+): (\d+) items in ([\d.]+) s, ([\d.]+) items/s, ([\d.]+) ms CPU/item")
TOTAL_LINE = re.compile(r"done in ([\d.]+) s: ([\d.]+) items/s in all")


def seed(count: int) -> None:
    import numpy as np

    from bench.search_labels import load_jsonl
    from items.models import ItemStatus, ProcessedItem, RawItem
    from items.services.agents import agent_create

    docs = load_jsonl("search_corpus.jsonl")
    author = agent_create(name="reembed-bench")
    rng = np.random.default_rng(7)
    raws = []
    for n in range(count):
        content = f"{docs[n % len(docs)]['content']} (ref {n})"
        raws.append(RawItem(author=author, content=content, content_hash=hashlib.sha256(content.encode()).hexdigest()))
    RawItem.objects.bulk_create(raws, batch_size=1000)
    vectors = rng.standard_normal((count, 384)).astype(np.float32)
    ProcessedItem.objects.bulk_create(
        [
            ProcessedItem(raw=raw, author=author, status=ItemStatus.COMPLETED, embedding=vector, embedding_model=OLD)
            for raw, vector in zip(raws, vectors, strict=True)
        ],
        batch_size=1000,
    )


def run(processes: int, batch: int, env: dict[str, str]) -> tuple[list[tuple[int, float, float]], float, float]:
    """[(items, items/s, CPU ms per item) per process], the wall time and the overall rate."""
    from items.models import ProcessedItem

    ProcessedItem.objects.exclude(embedding=None).update(embedding_model=OLD)
    command = [sys.executable, "manage.py", "reembed_items", "--processes", str(processes), "--batch", str(batch)]
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    if result.returncode:
        raise SystemExit(result.stderr[-3000:])
    shares = [(int(m.group(2)), float(m.group(4)), float(m.group(5))) for m in PROCESS_LINE.finditer(result.stderr)]
    total = TOTAL_LINE.search(result.stderr)
    if total is None or not shares:
        raise SystemExit(f"unexpected output:\n{result.stderr[-3000:]}")
    return shares, float(total.group(1)), float(total.group(2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=3000)
    parser.add_argument("--processes", default="1,2", help="comma-separated process counts to measure")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--embedding", choices=("e5", "minilm"), default="e5", help="the local embedding to move to")
    args = parser.parse_args()
    env = scratch_environment(
        SCRATCH_DB, 13, LLM_PROVIDER="local", LOCAL_EMBEDDING=args.embedding, EMBEDDING_DIMENSIONS="384"
    )
    try:
        started = time.perf_counter()
        seed(args.items)
        print(f"seeded {args.items} items in {time.perf_counter() - started:.1f} s; {os.cpu_count()} CPUs")
        header = f"{'processes':>9} {'wall s':>8} {'items/s':>9} {'items/s per process':>22}"
        print(f"{header} {'CPU ms/item':>12} {'1M items':>10}")
        for processes in (int(value) for value in args.processes.split(",")):
            from django.db import connections

            connections.close_all()
            shares, seconds, rate = run(processes, args.batch, env)
            per_process = "/".join(f"{items_per_s:.0f}" for _, items_per_s, _ in shares)
            cpu = sum(items * ms for items, _, ms in shares) / max(1, sum(items for items, _, _ in shares))
            hours = 1_000_000 / rate / 3600
            print(f"{processes:>9} {seconds:>8.1f} {rate:>9.1f} {per_process:>22} {cpu:>12.1f} {hours:>9.1f}h")
    finally:
        from django.db import connections

        connections.close_all()
        scratch_drop(SCRATCH_DB)


if __name__ == "__main__":
    main()
