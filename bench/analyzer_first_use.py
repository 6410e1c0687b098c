"""First use of the offline analyzer in a new process, cold (no model cache: the learned models are trained) and
with the cache filled by the cold run (they are read back): process CPU of each warm-up step
(pipeline.llm.local.warm, what run_pipeline's item consumer does before its first claim), then of a first item
judged after it. Each run is a fresh process; the cache is a temporary directory, the project's is not touched.

    .venv/bin/python bench/analyzer_first_use.py [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ITEM = "我们在上海有 32 张 A100 显卡可以按小时出租. DM me for the price, limited offer!"


def child() -> None:
    """One process's first use, as JSON on stdout."""
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from pipeline.llm import local
    from pipeline.llm.local import minilm

    started = time.process_time()
    steps = local.warm_up()
    warm = time.process_time() - started
    started = time.process_time()
    local.embed_texts([ITEM], minilm.DIMENSIONS)
    local.safety_verdict(content=ITEM)
    local.extract(content=ITEM)
    print(json.dumps({**steps, "warm-up, all steps": warm, "first item after it": time.process_time() - started}))


def run(cache: Path) -> dict[str, float]:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "eigenflux.settings",
        "LLM_PROVIDER": "local",
        "LOG_LEVEL": "WARNING",
        "LOCAL_MODEL_CACHE_DIR": str(cache),
    }
    done = subprocess.run(
        [sys.executable, __file__, "--child"], env=env, cwd=ROOT, capture_output=True, text=True, check=True
    )
    figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2, help="cold and cached runs each (the median is shown)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child()
        return
    cold, cached = [], []
    for _ in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="model-cache-") as folder:
            cold.append(run(Path(folder)))
            cached.append(run(Path(folder)))
    print(f"{'first use (s CPU, median of ' + str(args.rounds) + ')':<40}{'cold':>8}{'cached':>8}")
    for step in cold[0]:
        before = statistics.median(figures[step] for figures in cold)
        after = statistics.median(figures[step] for figures in cached)
        print(f"{step:<40}{before:>8.2f}{after:>8.2f}")


if __name__ == "__main__":
    main()
