"""The broadcasts `bench/pipeline_throughput.py --local` gives the pipeline when it runs the offline analyzer."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The warm-up's broadcasts, by index in the search corpus: three in English and three in Chinese or Japanese, so
# that every model and dictionary of the offline analyzer is loaded (and its classifiers trained) before the window.
WARMUP = (0, 1, 2, 3, 4, 5)


def local_texts() -> list[str]:
    """The search corpus's broadcasts, English ones and the others interleaved so that any prefix mixes them, and
    the WARMUP indexes holding three of each."""
    corpus = ROOT / "bench" / "data" / "search_corpus.jsonl"
    texts = [json.loads(line)["content"] for line in corpus.read_text(encoding="utf-8").splitlines() if line]
    english = [text for text in texts if text.isascii()]
    others = [text for text in texts if not text.isascii()]
    mixed = [text for pair in zip(english, others, strict=False) for text in pair]
    longer = english if len(english) > len(others) else others
    return mixed + longer[len(mixed) // 2 :]


def local_batches(conn, client, publish, wanted: int) -> tuple[tuple[list, list], tuple[list, list]]:
    """From a clean slate (every run judges the same broadcasts, so none may be a duplicate of the last run's):
    the warm-up's (ids, envelopes), then those of up to `wanted` more broadcasts. `publish(texts)` publishes."""
    conn.execute("TRUNCATE items_rawitem, items_outboxevent CASCADE")
    client.flushdb()
    texts = local_texts()
    warmup = publish([texts[k] for k in WARMUP])
    rest = [text for k, text in enumerate(texts) if k not in WARMUP]
    return warmup, publish(rest[:wanted])


def outcomes(conn, ids: list[int]) -> dict[str, int]:
    """The items' terminal statuses, counted."""
    sql = "SELECT status, count(*) FROM items_processeditem WHERE raw_id = ANY(%s) GROUP BY 1 ORDER BY 1"
    return dict(conn.execute(sql, [ids]).fetchall())
