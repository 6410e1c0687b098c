"""What a GIN index's pending list costs keyword search, and what turning it off costs writes.

A table of search vectors like the product's (the labelled corpus with extra words, as bench/search_latency.py
makes them, `--items` in all) gets its GIN index built once filled; then the newest `--live` rows are written
ten per transaction, as the pipeline completes items, under each setting: the pending list at PostgreSQL's
default limit (4 MB) and smaller ones, and off (fastupdate = off, the product's setting since migration
items.0016). For each: the write cost per row, and the time of the keyword leg's candidate query (match, newest
200) for every bench query. Between settings the live rows are deleted and the table vacuumed, which also
empties the pending list.

    flock /tmp/eigenflux-bench.lock .venv/bin/python bench/gin_pending.py [--items 100000] [--live 2000]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.scratch import scratch_drop, scratch_environment  # noqa: E402

SCRATCH_DB = "bench_eigenflux_gin_pending"
SETTINGS = {
    "pending list, 4 MB (PostgreSQL's default)": "fastupdate = on, gin_pending_list_limit = 4096",
    "pending list, 1 MB": "fastupdate = on, gin_pending_list_limit = 1024",
    "pending list, 256 kB": "fastupdate = on, gin_pending_list_limit = 256",
    "pending list, 64 kB": "fastupdate = on, gin_pending_list_limit = 64",
    "no pending list (fastupdate off)": "fastupdate = off",
}
COMMON = ["team", "update", "week", "project", "available", "details", "contact", "soon"]


def fill(cursor, items: int, rng: random.Random) -> None:
    """Stage `items` rows' texts (corpus texts with extra words): keywords, summary, content, as index_text()s."""
    from items.textsearch import index_text

    docs = [json.loads(line) for line in (ROOT / "bench" / "data" / "search_corpus.jsonl").open(encoding="utf-8")]
    cursor.execute("CREATE TABLE gin_staged (id bigint PRIMARY KEY, k text, s text, c text)")
    with cursor.copy("COPY gin_staged FROM STDIN") as copy:
        for item_id in range(1, items + 1):
            doc = rng.choice(docs)
            content = f"{doc['content']} {' '.join(rng.sample(COMMON, 2))} batchref{item_id}"
            texts = (" ".join(doc["key_terms"]), doc["content"][:120], content)
            copy.write_row((item_id, *(index_text(text) for text in texts)))
    cursor.execute("CREATE TABLE gin_items (id bigint PRIMARY KEY, search_vector tsvector)")


def insert(cursor, low: int, high: int) -> None:
    """Rows low+1 .. high with the product's search vector (items.textsearch.search_vector_sql)."""
    from items.textsearch import search_vector_sql

    vector = search_vector_sql("k", "s", "c")
    cursor.execute(f"INSERT INTO gin_items SELECT id, {vector} FROM gin_staged WHERE id > %s AND id <= %s", [low, high])  # noqa: S608


def candidate_queries() -> list[tuple[str, list]]:
    """The keyword leg's candidate query for each bench query: the matches, newest 200."""
    from django.db import connection
    from django.db.models.sql import Query

    from items.models import ProcessedItem
    from items.textsearch import keyword_query

    compiler = Query(ProcessedItem).get_compiler(connection=connection)
    queries = []
    for line in (ROOT / "bench" / "data" / "search_queries.jsonl").open(encoding="utf-8"):
        keyword = keyword_query(json.loads(line)["q"])
        if keyword is None:
            continue
        sql, params = keyword.match.resolve_expression(compiler.query).as_sql(compiler, connection)
        candidates = f"SELECT id FROM gin_items WHERE search_vector @@ {sql} ORDER BY id + 0 DESC LIMIT 200"  # noqa: S608
        queries.append((candidates, params))
    return queries


def timed(cursor, queries: list[tuple[str, list]]) -> list[float]:
    """Each query's milliseconds, sorted, after a first pass that warms the caches."""
    for sql, params in queries:
        cursor.execute(sql, params)
        cursor.fetchall()
    timings: list[float] = []
    for sql, params in queries:
        started = time.perf_counter()
        cursor.execute(sql, params)
        cursor.fetchall()
        timings.append((time.perf_counter() - started) * 1000)
    return sorted(timings)


def pct(ordered: list[float], q: float) -> float:
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def measure(cursor, items: int, live: int, options: str, queries: list[tuple[str, list]]) -> tuple[float, list[float]]:
    """Write the newest `live` rows ten per transaction under `options`; their ms per row, then query timings."""
    cursor.execute("DELETE FROM gin_items WHERE id > %s", [items - live])
    cursor.execute("VACUUM gin_items")
    cursor.execute(f"ALTER INDEX gin_items_search SET ({options})")
    started = time.perf_counter()
    for low in range(items - live, items, 10):
        insert(cursor, low, min(low + 10, items))
    per_row = (time.perf_counter() - started) * 1000 / live
    return per_row, timed(cursor, queries)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=100_000, help="rows in all (default 100000)")
    parser.add_argument("--live", type=int, default=2000, help="newest rows written ten per transaction (2000)")
    args = parser.parse_args()
    scratch_environment(SCRATCH_DB, redis_db=14)
    from django.db import connection

    with connection.cursor() as cursor:
        fill(cursor, args.items, random.Random(7))
        cursor.execute("SET maintenance_work_mem = '512MB'")
        insert(cursor, 0, args.items)
        cursor.execute("CREATE INDEX gin_items_search ON gin_items USING gin (search_vector)")
        cursor.execute("VACUUM ANALYZE gin_items")
        queries = candidate_queries()
        rows = [("bulk-built index, nothing written since", 0.0, timed(cursor, queries))]
        for label, options in SETTINGS.items():
            rows.append((label, *measure(cursor, args.items, args.live, options, queries)))
    connection.close()
    scratch_drop(SCRATCH_DB)
    print(f"\nKeyword candidate query ({len(queries)} bench queries) at {args.items:,} rows, after {args.live:,} rows")
    print("written ten per transaction; ms")
    print(f"{'GIN index':<44}{'write/row':>10}{'p50':>8}{'p90':>8}{'p99':>8}{'max':>8}{'sum':>8}")
    print("-" * 94)
    for label, per_row, timings in rows:
        written = f"{per_row:>10.2f}" if per_row else f"{'':>10}"
        shown = "".join(f"{pct(timings, q):>8.1f}" for q in (0.5, 0.9, 0.99, 1.0))
        print(f"{label:<44}{written}{shown}{sum(timings):>8.0f}")


if __name__ == "__main__":
    main()
