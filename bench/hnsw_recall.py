"""What the item table's HNSW graphs cost and buy: per configuration (m, ef_construction of a main graph over all
items and of the per-type graphs, either of them absent), the backend's CPU per inserted item, and the recall
against exact search and the backend's CPU per query of a query over all types and of one per type.

The corpus is every broadcast text in bench/data embedded with the local embedding (MiniLM, CJK through its
gloss), optionally grown to --items with synthetic neighbours of those vectors (a real vector plus noise,
normalised), so a graph's size can reach what a network holds. Each item gets a broadcast type: its label where
the file has one, else one drawn by the SHA-256 of its text with the network's type shares.

For each configuration the items go into a fresh table that already has its graphs (a main one, one partial
graph per type, or both), one INSERT per item in its own transaction, as the pipeline's completion does; the
backend's CPU is read from /proc/<pid>/schedstat around the inserts and around each query. Then each query asks
the nearest items through the indexes, at the ef_search the application sets, and is compared with an exact
search (numpy). A query over all types walks the main graph or, without one, each type's graph merged by
distance (the one-graph-per-item design, docs/performance.md); a query for one type walks its graph or, without
per-type graphs, the main graph filtered, at ef_search divided by the type's share (the over-fetch that
keeps about as many of the type, at most pgvector's 1000). Recall@10 (ef_search 40, the default: the similarity
search, a search's first page) and recall@50 / recall@80 (ef_search 100: the feed's per-walk depth,
FEED_CANDIDATES_NEAREST + FEED_HNSW_EF_MARGIN).
Queries: the labelled search queries' texts, and corpus items (each item's nearest other items). The queries are
split by the SHA-256 of their text (first byte even: tuning, odd: held out) and the two halves printed apart.

    flock /tmp/eigenflux-bench.lock .venv/bin/python bench/hnsw_recall.py [--items 20000]
        [--configs 16/48:16/32,-:16/32,16/48:-] [--item-queries 200]

With `--filtered 100k` it measures filtered semantic search instead, the application's path against exact search
on bench/seed.py's network (bench/filtered_recall.py says how).

A configuration is MAIN_M/MAIN_EFC:TYPE_M/TYPE_EFC, either side `-` for no such graph: 16/48:16/32 is the
application's two graphs per item, -:16/32 one graph per item (measured, not taken). Scratch database
`eigenflux_hnsw_recall` (dropped and recreated, dropped at the end).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DB = "eigenflux_hnsw_recall"
TYPES = (("supply", 0.35), ("demand", 0.25), ("info", 0.3), ("alert", 0.1))  # as bench/feed_network.py
SHORT_EF, LONG_EF = 40, 100
DEPTHS = ((10, SHORT_EF), (50, LONG_EF), (80, LONG_EF))
WARM_UP = 3000  # items of an unmeasured first build


@dataclass(frozen=True)
class Config:
    """Build parameters (m, ef_construction) of the main graph and of the per-type graphs; None: no such graph."""

    main: tuple[int, int] | None
    per_type: tuple[int, int] | None

    @classmethod
    def parse(cls, text: str) -> Config:
        try:
            main, per_type = (None if part == "-" else tuple(map(int, part.split("/"))) for part in text.split(":"))
            if (main is None and per_type is None) or any(p is not None and len(p) != 2 for p in (main, per_type)):
                raise ValueError(text)
        except ValueError as exc:
            raise SystemExit(
                f"bad configuration {text!r}: expected MAIN_M/MAIN_EFC:TYPE_M/TYPE_EFC, either side '-' for no such "
                "graph, e.g. 16/64:8/32 or -:16/32"
            ) from exc
        return cls(main, per_type)  # type: ignore[arg-type]

    def __str__(self) -> str:
        main = f"main m={self.main[0]} efc={self.main[1]}" if self.main else "no main graph"
        per_type = f"per type m={self.per_type[0]} efc={self.per_type[1]}" if self.per_type else "no per-type graphs"
        return f"{main}, {per_type}"


def _first_byte(text: str) -> int:
    return hashlib.sha256(text.encode()).digest()[0]


def _drawn_type(text: str) -> str:
    point = int.from_bytes(hashlib.sha256(("type:" + text).encode()).digest()[:4], "big") / 2**32
    for kind, share in TYPES:
        point -= share
        if point < 0:
            return kind
    return TYPES[-1][0]


def corpus_texts() -> list[tuple[str, str]]:
    """(text, broadcast type) of every distinct broadcast text in bench/data (queries and reader profiles aside)."""
    seen: dict[str, str] = {}
    for path in sorted((ROOT / "bench" / "data").glob("*.jsonl")):
        if path.name.startswith(("search_queries", "feed_readers")):
            continue
        for line in path.open(encoding="utf-8"):
            if not line.strip():
                continue
            row = json.loads(line)
            text = row.get("content") or row.get("text")
            if text and text not in seen:
                seen[text] = row.get("broadcast_type") or row.get("type") or _drawn_type(text)
    return sorted(seen.items())


def query_texts() -> list[str]:
    texts = set()
    for name in ("search_queries.jsonl", "search_queries_independent.jsonl"):
        for line in (ROOT / "bench" / "data" / name).open(encoding="utf-8"):
            if line.strip():
                texts.add(json.loads(line)["q"])
    return sorted(texts)


def grow(vectors: np.ndarray, kinds: list[str], total: int, spread: float, seed: int) -> tuple[np.ndarray, list[str]]:
    """The corpus grown to `total` vectors with noisy copies of random real ones (each keeps its origin's type)."""
    extra = total - len(vectors)
    if extra <= 0:
        return vectors, kinds
    rng = np.random.default_rng(seed)
    origin = rng.integers(0, len(vectors), extra)
    noise = rng.standard_normal((extra, vectors.shape[1])).astype(np.float32) * spread / np.sqrt(vectors.shape[1])
    grown = vectors[origin] + noise
    grown /= np.linalg.norm(grown, axis=1, keepdims=True)
    return np.vstack([vectors, grown]), kinds + [kinds[n] for n in origin]


def cpu_ns(pid: int) -> int:
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])


def vector_text(values: np.ndarray) -> str:
    return "[" + ",".join(f"{x:.6f}" for x in values) + "]"


@contextmanager
def scratch(base_url: str) -> Iterator[str]:
    import psycopg

    with psycopg.connect(base_url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {DB}")
    url = base_url.rsplit("/", 1)[0] + f"/{DB}"
    try:
        yield url
    finally:
        with psycopg.connect(base_url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")


def build(conn, config: Config, vectors: np.ndarray, kinds: list[str]) -> float:
    """A fresh table with the configuration's graphs, filled one item per transaction; the backend's CPU ms per
    insert."""
    dims = vectors.shape[1]
    conn.execute("DROP TABLE IF EXISTS hnsw_items")
    conn.execute(f"CREATE TABLE hnsw_items (id integer PRIMARY KEY, kind text NOT NULL, embedding vector({dims}))")
    if config.main:
        conn.execute(
            "CREATE INDEX hnsw_items_main ON hnsw_items USING hnsw (embedding vector_cosine_ops) "
            f"WITH (m = {config.main[0]}, ef_construction = {config.main[1]})"
        )
    if config.per_type:
        m, ef_construction = config.per_type
        for kind, _ in TYPES:
            conn.execute(
                f"CREATE INDEX hnsw_items_{kind} ON hnsw_items USING hnsw (embedding vector_cosine_ops) "
                f"WITH (m = {m}, ef_construction = {ef_construction}) WHERE kind = '{kind}'"
            )
    pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
    rows = [(n, kind, vector_text(vector)) for n, (kind, vector) in enumerate(zip(kinds, vectors, strict=True))]
    start = cpu_ns(pid)
    for row in rows:
        conn.execute("INSERT INTO hnsw_items VALUES (%s, %s, %s::vector)", row)
    spent = cpu_ns(pid) - start
    conn.execute("ANALYZE hnsw_items")
    return spent / 1e6 / len(rows)


def _walk(config: Config, kind: str | None, shares: dict[str, float], ef: int) -> tuple[str, int]:
    """The SQL of one nearest-neighbour query (parameters: the vector, the limit) as the application asks it with
    `config`'s graphs, and the ef_search it runs at. All types: the main graph, or without one every per-type
    graph's walk merged by distance. One type: its graph, or without per-type graphs a filtered
    walk of the main graph at ef_search / the type's share (the over-fetch factor; at most pgvector's 1000)."""
    if kind is None and config.main is None:
        walks = " UNION ALL ".join(
            f"(SELECT id, embedding <=> %(v)s::vector AS d FROM hnsw_items WHERE kind = '{t}' "  # noqa: S608
            "ORDER BY d LIMIT %(n)s)"
            for t, _ in TYPES
        )
        return f"SELECT id FROM ({walks}) AS nearest ORDER BY d LIMIT %(n)s", ef  # noqa: S608
    where = f"WHERE kind = '{kind}' " if kind else ""
    sql = f"SELECT id FROM hnsw_items {where}ORDER BY embedding <=> %(v)s::vector LIMIT %(n)s"  # noqa: S608
    if kind and config.per_type is None:
        return sql, min(1000, math.ceil(ef / shares[kind]))
    return sql, ef


def _uses_index(conn, sql: str, probe: str) -> bool:
    plan = conn.execute("EXPLAIN " + sql, {"v": probe, "n": 10}).fetchall()
    return any("hnsw_items_" in line[0] for line in plan)


def recall(conn, config: Config, vectors: np.ndarray, kinds: np.ndarray, queries, kind: str | None, depths=DEPTHS):
    """Mean recall at each (depth, ef_search) of `depths` for `queries` ((vector, own id to leave out or None))
    over all types (kind None) or `kind`'s items, and the backend's CPU ms per query at each depth."""
    shares = {t: float(np.mean(kinds == t)) for t, _ in TYPES}
    probe, _ = _walk(config, kind, shares, SHORT_EF)
    if not _uses_index(conn, probe, vector_text(queries[0][0])):
        raise SystemExit(f"the planner does not use an HNSW index for kind={kind}: the figures would be exact")
    pool = np.flatnonzero(kinds == kind) if kind else np.arange(len(vectors))
    found: dict[int, list[float]] = {k: [] for k, _ in depths}
    spent = dict.fromkeys(found, 0)
    pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
    for vector, own in queries:
        scores = vectors[pool] @ vector
        order = pool[np.argsort(-scores, kind="stable")]
        for k, ef in depths:
            sql, ef_search = _walk(config, kind, shares, ef)
            conn.execute(f"SET hnsw.ef_search = {ef_search}")
            start = cpu_ns(pid)
            ids = [row[0] for row in conn.execute(sql, {"v": vector_text(vector), "n": k + 1}).fetchall()]
            spent[k] += cpu_ns(pid) - start
            truth = [n for n in order[: k + 1] if n != own][:k]
            got = {n for n in ids if n != own}
            found[k].append(len(got & set(truth)) / max(1, len(truth)))
    figures = {k: float(np.mean(values)) for k, values in found.items()}
    return figures, {k: ns / 1e6 / len(queries) for k, ns in spent.items()}


def _three(figures: dict[int, float]) -> str:
    return " / ".join(f"{figures[k]:.3f}" for k, _ in DEPTHS)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=0, help="grow the corpus to this many items (0: the real texts)")
    parser.add_argument("--spread", type=float, default=0.6, help="noise of a synthetic neighbour (norm)")
    parser.add_argument("--configs", default="16/48:16/32,-:16/32,16/48:16/32,-:16/32")
    parser.add_argument("--item-queries", type=int, default=200, help="corpus items used as queries")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--nearest-ef",
        default="",
        help="comma list of ef_search values: also print the nearest item's recall (the similarity search's "
        "LIMIT 1) and CPU per query over all types at each",
    )
    parser.add_argument(
        "--filtered",
        choices=("10k", "100k", "1M"),
        help="instead: filtered semantic search against exact search on bench/seed.py's network of this scale "
        "(bench/filtered_recall.py)",
    )
    parser.add_argument("--queries", type=int, default=80, help="with --filtered: search queries asked")
    parser.add_argument("--factor", type=float, help="with --filtered: FILTER_EF_FACTOR to measure")
    parser.add_argument("--baseline", default="", help="with --filtered: another items search module to measure")
    parser.add_argument("--only", default="", help="with --filtered: the filters whose labels start so (comma list)")
    return parser.parse_args()


def corpus_and_queries(args: argparse.Namespace, minilm_vectors):
    """The corpus's vectors and types (grown to --items), and the queries split into tuning and held-out halves."""
    texts = corpus_texts()
    vectors = minilm_vectors([text for text, _ in texts])
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    kinds = [kind for _, kind in texts]
    real = len(vectors)
    vectors, kinds = grow(vectors, kinds, args.items, args.spread, args.seed)
    asked = query_texts()
    rng = np.random.default_rng(args.seed)
    sample = rng.choice(real, size=min(args.item_queries, real), replace=False)
    halves: dict[str, list[tuple[np.ndarray, int | None]]] = {"tuning": [], "held-out": []}
    for text, vector in zip(asked, minilm_vectors(asked), strict=True):
        halves["tuning" if _first_byte(text) % 2 == 0 else "held-out"].append((vector / np.linalg.norm(vector), None))
    for n in sample:
        halves["tuning" if _first_byte(texts[n][0]) % 2 == 0 else "held-out"].append((vectors[n], int(n)))
    counts = {kind: kinds.count(kind) for kind, _ in TYPES}
    print(f"corpus: {len(vectors)} items ({real} real texts), per type {counts}; queries: "
          f"{len(halves['tuning'])} tuning, {len(halves['held-out'])} held out "
          f"({len(asked)} search queries and {len(sample)} items in all)")  # fmt: skip
    return vectors, kinds, halves


def main() -> None:
    args = parse_args()
    if args.filtered:
        from bench.filtered_recall import run

        return run(args.filtered, args.queries, args.factor, args.baseline, args.only)
    configs = [Config.parse(text) for text in args.configs.split(",")]
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "eigenflux.settings")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    os.environ["LOCAL_EMBEDDING"] = "minilm"
    import django

    django.setup()
    import psycopg

    from eigenflux.base import embedded
    from pipeline.llm.local.embedding import minilm_vectors

    vectors, kinds, halves = corpus_and_queries(args, minilm_vectors)
    kinds_array = np.array(kinds)
    base_url = os.environ.get("DATABASE_URL") or embedded.postgres_url(
        Path(os.environ.get("EIGENFLUX_DATA_DIR") or ROOT / ".data")
    )
    header = (
        "| configuration | insert CPU ms/item | queries | all types recall@10 / @50 / @80 | all types query CPU ms "
        "@10 / @80 | per type (mean of 4) recall@10 / @50 / @80 | lowest type recall@10 | per type query CPU ms @10 |"
    )
    lines = [header, "|---|---|---|---|---|---|---|---|"]
    nearest = [
        "| configuration | ef_search | queries | nearest item found (recall@1) | query CPU ms |",
        "|---|---|---|---|---|",
    ]
    with scratch(base_url) as url, psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        # Unmeasured: the first build in a fresh database cost about twice the same build later (the database's
        # files and the server's caches warming up), which would have charged it to the first configuration.
        build(conn, configs[0], vectors[:WARM_UP], kinds[:WARM_UP])
        for config in configs:
            per_insert = build(conn, config, vectors, kinds)
            for half, queries in halves.items():
                every, every_cpu = recall(conn, config, vectors, kinds_array, queries, None)
                typed = [recall(conn, config, vectors, kinds_array, queries, kind) for kind, _ in TYPES]
                mean = {k: float(np.mean([figures[k] for figures, _ in typed])) for k, _ in DEPTHS}
                lowest = min(figures[DEPTHS[0][0]] for figures, _ in typed)
                typed_cpu = float(np.mean([cpu[DEPTHS[0][0]] for _, cpu in typed]))
                lines.append(
                    f"| {config} | {per_insert:.2f} | {half} | {_three(every)} "
                    f"| {every_cpu[10]:.2f} / {every_cpu[80]:.2f} | {_three(mean)} | {lowest:.3f} | {typed_cpu:.2f} |"
                )
            for ef in [int(value) for value in args.nearest_ef.split(",") if value]:
                for half, queries in halves.items():
                    found, spent = recall(conn, config, vectors, kinds_array, queries, None, depths=((1, ef),))
                    nearest.append(f"| {config} | {ef} | {half} | {found[1]:.3f} | {spent[1]:.2f} |")
            print(f"done: {config} ({per_insert:.2f} ms per insert)", flush=True)
    print("\n".join(lines))
    if len(nearest) > 2:
        print("\nThe nearest item over all types (the similarity search's shape: LIMIT 1):")
        print("\n".join(nearest))


if __name__ == "__main__":
    main()
