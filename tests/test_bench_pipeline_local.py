"""`bench/pipeline_throughput.py --local` measures the offline analyzer's cost per item in the pipeline: its
warm-up must load every model (English and CJK) before the window, and its items must be distinct broadcasts
that mix languages however many a run takes."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def load_bench():
    spec = importlib.util.spec_from_file_location("bench_pipeline_local", ROOT / "bench/pipeline_local.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_warm_up_holds_english_and_cjk_broadcasts_and_the_items_are_distinct():
    bench = load_bench()
    texts = bench.local_texts()
    warmup = [texts[k] for k in bench.WARMUP]
    assert sum(text.isascii() for text in warmup) == 3
    assert sum(not text.isascii() for text in warmup) == 3
    assert len(set(texts)) == len(texts)
    measured = [text for k, text in enumerate(texts) if k not in bench.WARMUP]
    first = measured[:40]
    assert 15 <= sum(text.isascii() for text in first) <= 25
