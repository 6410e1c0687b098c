"""`bench/pipeline_throughput.py --local` measures the offline analyzer's cost per item in the pipeline: its
warm-up must load every model (English and CJK) before the window, and its items must be distinct broadcasts
that mix languages however many a run takes."""

from __future__ import annotations

from bench.pipeline_local import WARMUP, local_texts


def test_the_warm_up_holds_english_and_cjk_broadcasts_and_the_items_are_distinct():
    texts = local_texts()
    warmup = [texts[k] for k in WARMUP]
    assert sum(text.isascii() for text in warmup) == 3
    assert sum(not text.isascii() for text in warmup) == 3
    assert len(set(texts)) == len(texts)
    measured = [text for k, text in enumerate(texts) if k not in WARMUP]
    first = measured[:40]
    assert 15 <= sum(text.isascii() for text in first) <= 25
