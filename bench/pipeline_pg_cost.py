"""Where PostgreSQL spends its CPU per enriched item: the costly statements of the enrichment, each run alone for
every item of the last bench/pipeline_throughput.py run (database `eigenflux_pipebench`, left behind by it), in
transactions that are rolled back, with the backend's CPU time read from /proc around each batch.

Statements: the similarity search (HNSW walk: the graph over all items; on a database without it, each type's
graph walked and merged, as the one-graph-per-item design measured in docs/performance.md sent it), writing the
embedding (HNSW insert), writing the embedding checkpoint (a column no index covers), computing the search vector
alone (to_tsvector of keywords, summary and content), writing it (the same plus the GIN index entries), a
checkpoint write of a small column (the plain cost of an update of the row). First it prints how many of the
run's updates of an item's row were HOT (pg_stat_user_tables).

    flock /tmp/eigenflux-bench.lock .venv/bin/python bench/pipeline_pg_cost.py [--items 300]
    flock /tmp/eigenflux-bench.lock .venv/bin/python bench/pipeline_pg_cost.py --seeded 1M  # bench/seed.py's network

With `--seeded` the same statements run on bench/seed.py's kept network of that scale (its newest items), so the
pipeline's PostgreSQL cost per item can be read at 10k, 100k and 1M items (docs/scaling.md).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.pipeline_throughput import DB, proc_cpu  # noqa: E402

TYPES = ("supply", "demand", "info", "alert")


def similarity_search(main_graph: bool, half: int) -> tuple[str, Callable[[tuple], list]]:
    """The similarity search as items.selectors.most_similar sends it (one walk of the graph over all items), or,
    on a database without that graph, each type's graph walked and the nearest of the four kept (the
    one-graph-per-item design measured in docs/performance.md). `half`: the dimensions of the graphs' halfvec key
    (items.models.graph_key), 0 on a database whose graphs are over the vectors themselves (before it)."""
    order = f"(embedding)::halfvec({half}) <=> %b::halfvec({half})" if half else "embedding <=> %b"
    walk = (
        "SELECT raw_id, (embedding <=> %b) AS d FROM items_processeditem WHERE {kind}status = 'completed' "  # noqa: S608
        f"AND embedding IS NOT NULL AND raw_id <> %s ORDER BY {order} LIMIT 1"
    )
    if main_graph:
        return walk.format(kind=""), lambda r: [r[1], r[0], r[1]]
    walks = " UNION ALL ".join(f"({walk.format(kind=f'broadcast_type = {kind!r} AND ')})" for kind in TYPES)
    union = f"SELECT raw_id, d FROM ({walks}) AS nearest ORDER BY d LIMIT 1"  # noqa: S608
    return union, lambda r: [r[1], r[0], r[1]] * len(TYPES)


def costly_statements(rng, main_graph: bool, half: int) -> dict[str, tuple[str, Callable[[tuple], list]]]:
    """The statements measured, each with its parameters for one (raw_id, embedding, summary, keywords) row."""
    from items.textsearch import search_vector_sql

    search = search_vector_sql()
    return {
        "similarity search (HNSW walk)": similarity_search(main_graph, half),
        "write the embedding (HNSW insert)": (
            "UPDATE items_processeditem SET embedding = %b WHERE raw_id = %s",
            lambda r: [_unit(rng, len(r[1].to_list())), r[0]],
        ),
        "write the embedding checkpoint (no index)": (
            "UPDATE items_processeditem SET pending_embedding = %b WHERE raw_id = %s",
            lambda r: [_unit(rng, len(r[1].to_list())), r[0]],
        ),
        "compute the search vector only": (
            f"SELECT {search}",
            lambda r: [" ".join(r[3]), r[2], r[2] * 3],
        ),
        "write the search vector (+ GIN)": (
            f"UPDATE items_processeditem SET search_vector = {search} WHERE raw_id = %s",  # noqa: S608
            lambda r: [" ".join(r[3]) + " x", r[2], r[2] * 3, r[0]],
        ),
        "write a small column (row update)": (
            "UPDATE items_processeditem SET suggestion = %s WHERE raw_id = %s",
            lambda r: ["Reply to the author.", r[0]],
        ),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=300)
    parser.add_argument("--seeded", choices=("10k", "100k", "1M"), help="bench/seed.py's network instead")
    args = parser.parse_args()
    import psycopg
    from pgvector.psycopg import register_vector

    from eigenflux.base import embedded

    data_dir = Path(os.environ.get("EIGENFLUX_DATA_DIR") or ROOT / ".data")
    base = os.environ.get("DATABASE_URL") or embedded.postgres_url(data_dir)
    if args.seeded:
        from bench.seed import database_name

        database = database_name(args.seeded)
    else:
        database = DB
    conn = psycopg.connect(base.rsplit("/", 1)[0] + f"/{database}", autocommit=True)
    register_vector(conn)
    pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
    rows = conn.execute(
        "SELECT raw_id, embedding, summary, keywords FROM items_processeditem WHERE status = 'completed' "
        "AND embedding IS NOT NULL ORDER BY raw_id DESC LIMIT %s",
        [args.items],
    ).fetchall()
    if not rows:
        raise SystemExit(f"no completed items in {database}: run bench/pipeline_throughput.py (or bench/seed.py) first")
    graphs = dict(conn.execute("SELECT indexname, indexdef FROM pg_indexes WHERE indexname LIKE 'processed_%%hnsw%%'"))
    half = next((int(m.group(1)) for d in graphs.values() if (m := re.search(r"::halfvec\((\d+)\)", d))), 0)
    statements = costly_statements(np.random.default_rng(7), "processed_embedding_hnsw" in graphs, half)
    updates, hot, inserts = conn.execute(
        "SELECT n_tup_upd, n_tup_hot_upd, n_tup_ins FROM pg_stat_user_tables WHERE relname = 'items_processeditem'"
    ).fetchone()
    if not args.seeded:  # a seeded network was written by COPY: no updates to count
        print(
            f"In the run: {updates / inserts:.1f} updates of an item's row per item, {hot / inserts:.1f} of them HOT "
            "(no index touched); the others insert the new row version into every index, the HNSW graphs included"
        )
    total = conn.execute("SELECT count(*) FROM items_processeditem").fetchone()[0]
    print(f"PostgreSQL CPU per statement, {len(rows)} items of {total:,}, load {os.getloadavg()[0]:.1f}")
    print("| statement | CPU ms per run |")
    print("|---|---|")
    for label, (sql, params) in statements.items():
        before = proc_cpu(pid)
        with conn.transaction(force_rollback=True):
            for row in rows:
                conn.execute(sql, params(row))
        print(f"| {label} | {(proc_cpu(pid) - before) * 1000 / len(rows):.2f} |", flush=True)
    return 0


def _unit(rng, dimensions: int) -> np.ndarray:
    vector = rng.standard_normal(dimensions).astype(np.float32)
    return vector / np.linalg.norm(vector)


if __name__ == "__main__":
    sys.exit(main())
