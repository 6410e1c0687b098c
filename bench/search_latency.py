"""Search latency as the network grows: seeds 10k, then 100k completed items (in bulk with COPY, not the
pipeline, except the newest 2000: written ten per transaction after the indexes are built, so the indexes
hold what a live network's do, such as a GIN index's pending entries), then times every search mode through
the API (in-process client: auth, query embedding, SQL, JSON) with no filter, a broadcast_type filter and a
domain filter, and prints p50/p99, where the machine's CPU went meanwhile and PostgreSQL's shared buffers per
request (the items' files read into the page cache first: bench/pg_usage.py). Also the recall of filtered
semantic search against an exact (index-free) search with the same filter.

Items are variations of the labelled corpus (bench/data): its texts with extra words from a small vocabulary
(some of them common, so a query can match a third of the network), and its real MiniLM vectors plus noise,
so clusters and filters have realistic sizes. A scratch database is created and dropped at the end.

    flock /tmp/eigenflux-bench.lock .venv/bin/python bench/search_latency.py [--sizes 10000,100000] [--live 2000]
    flock /tmp/eigenflux-bench.lock .venv/bin/python bench/search_latency.py --seeded 100k  # bench/seed.py's network
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import random
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
for name in ("LLM_API_KEY", "OPENAI_API_KEY", "LLM_PROVIDER"):
    os.environ.pop(name, None)
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "eigenflux.settings")
os.environ.setdefault("LOG_LEVEL", "WARNING")

import numpy as np  # noqa: E402
from django.conf import settings  # noqa: E402
from django.db import connection, transaction  # noqa: E402
from django.test import Client  # noqa: E402

import eigenflux.wsgi  # noqa: E402, F401  set up as a web process is (gunicorn loads this module)
from bench.pg_usage import BufferMeter, memory_report, page_cache_warm  # noqa: E402
from bench.seed import require_space, use_seeded  # noqa: E402
from eigenflux.base.embedding_space import configured_embedding_model  # noqa: E402
from items.models import ProcessedItem, RawItem  # noqa: E402
from items.search import semantic_candidates  # noqa: E402
from items.services.agents import agent_create, agent_token_create  # noqa: E402
from items.textsearch import index_text, search_vector_sql  # noqa: E402
from pipeline.llm import embed  # noqa: E402
from pipeline.llm.embeddings import semantic_floor  # noqa: E402

SCRATCH_DB = "bench_eigenflux_search_latency"
MODES = ("keyword", "semantic", "hybrid")
FILTERS = {"none": {}, "type=supply": {"broadcast_type": "supply"}, "domain=compute": {"domain": "compute"}}
COMMON = ["team", "update", "week", "project", "available", "details", "contact", "soon"]  # in many items
RARE = [f"{a}{b}" for a in ("alpha", "beta", "gamma", "delta", "omega") for b in ("wave", "stone", "leaf", "port")]
EXTRA_QUERIES = ["team update", "project details", "available soon"]  # common words: many matches each


PROCESSED_COLUMNS = (
    "raw_id, author_id, status, broadcast_type, summary, keywords, domains, lang, quality, group_id, embedding, "
    "analyzer, created_at, processed_at, updated_at, reason, timeliness, geo, source_type, expected_response, "
    "suggestion, attempts, last_error, claimed_by, embedding_model"
)
LIVE_BATCH = 10  # items per transaction for the newest items, as the pipeline completes them


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def seed(
    start: int, count: int, live: int, docs: list[dict], vectors: np.ndarray, author_id: int, rng: random.Random
) -> float:
    """Write `count` completed items (ids start+1 ...) with search vectors and embeddings: all but the newest
    `live` in bulk (COPY, then the indexes rebuilt), the newest `live` ten per transaction afterwards."""
    started = time.perf_counter()
    raw_rows, processed_rows, text_rows = io.StringIO(), io.StringIO(), io.StringIO()
    noise = np.random.default_rng(start).standard_normal((count, vectors.shape[1])).astype(np.float32)
    now = "2026-01-01 00:00:00+00"
    for offset in range(count):
        item_id = start + offset + 1
        base = rng.randrange(len(docs))
        doc = docs[base]
        extra = " ".join([*rng.sample(COMMON, 2), rng.choice(RARE), f"batchref{item_id}"])
        content = f"{doc['content']} {extra}"
        vector = vectors[base] + 0.35 * noise[offset] / np.sqrt(vectors.shape[1])
        vector /= np.linalg.norm(vector)
        keywords = doc["key_terms"]
        content_hash = hashlib.sha256(content.encode()).hexdigest()
        raw_rows.write(_row([item_id, author_id, content, "", "", "\\N", content_hash, now]))
        processed_rows.write(
            _row(
                [
                    item_id,
                    author_id,
                    "completed",
                    doc["broadcast_type"],
                    doc["content"][:120],
                    _array(keywords),
                    _array(doc["domains"]),
                    doc["expected_lang"],
                    0.7,
                    item_id,
                    "[" + ",".join(f"{x:.5f}" for x in vector) + "]",
                    "local",
                    now,
                    now,
                    now,
                    *[""] * 6,
                    0,
                    "",
                    "",
                    configured_embedding_model(),  # the corpus's MiniLM vectors: the configured local model's
                ]
            )
        )
        text_rows.write(
            _row([item_id, index_text(" ".join(keywords)), index_text(doc["content"][:120]), index_text(content)])
        )
    raw_table = ProcessedItem._meta.get_field("raw").related_model._meta.db_table
    rebuilt = [
        index
        for index in ProcessedItem._meta.indexes
        if index.name in ("processed_search", "processed_domains") or "hnsw" in index.name
    ]
    with connection.cursor() as cursor:
        cursor.execute("SET maintenance_work_mem = '768MB'")
        for index in rebuilt:
            cursor.execute(f"DROP INDEX IF EXISTS {index.name}")
        raw_copy = (
            f"COPY {raw_table} (id, author_id, content, notes, url, accept_reply, content_hash, created_at) FROM STDIN"
        )
        with cursor.connection.cursor().copy(raw_copy) as copy:
            copy.write(raw_rows.getvalue())
        cursor.execute(f"CREATE TEMP TABLE seed_processed (LIKE {ProcessedItem._meta.db_table} INCLUDING DEFAULTS)")
        with cursor.connection.cursor().copy(f"COPY seed_processed ({PROCESSED_COLUMNS}) FROM STDIN") as copy:
            copy.write(processed_rows.getvalue())
        cursor.execute("CREATE TEMP TABLE seed_text (id bigint PRIMARY KEY, k text, s text, c text)")
        with cursor.connection.cursor().copy("COPY seed_text FROM STDIN") as copy:
            copy.write(text_rows.getvalue())
        bulk_end = start + count - live
        _insert_staged(cursor, start, bulk_end)
    # The model's own definitions (the HNSW graph, one per broadcast type, the GIN indexes), built once filled.
    with connection.schema_editor(atomic=False) as editor:
        for index in rebuilt:
            editor.add_index(ProcessedItem, index)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT setval(pg_get_serial_sequence('{raw_table}', 'id'), {start + count})")
        cursor.execute(f"VACUUM ANALYZE {raw_table}")
        cursor.execute(f"VACUUM ANALYZE {ProcessedItem._meta.db_table}")
        # The newest items arrive as the pipeline writes them: small transactions through every index's insert
        # path (a GIN index's pending list, the HNSW graphs), after the last vacuum, as on a live network.
        for low in range(bulk_end, start + count, LIVE_BATCH):
            _insert_staged(cursor, low, min(low + LIVE_BATCH, start + count))
        cursor.execute("DROP TABLE seed_processed, seed_text")
    return time.perf_counter() - started


def _insert_staged(cursor, low: int, high: int) -> None:
    """Insert the staged items with ids low+1 .. high, each with the search vector that
    items.textsearch.search_vector_sql() describes, over its staged index_text()s."""
    vector = search_vector_sql("t.k", "t.s", "t.c")
    cursor.execute(
        f"INSERT INTO {ProcessedItem._meta.db_table} ({PROCESSED_COLUMNS}, search_vector) "  # noqa: S608
        f"SELECT {', '.join('p.' + name for name in PROCESSED_COLUMNS.split(', '))}, {vector} "
        "FROM seed_processed p JOIN seed_text t ON t.id = p.raw_id WHERE p.raw_id > %s AND p.raw_id <= %s",
        [low, high],
    )


def _escape(value) -> str:
    if value == "\\N":
        return value
    return str(value).replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def _row(values: list) -> str:
    return "\t".join(_escape(value) for value in values) + "\n"


def _array(values: list[str]) -> str:
    return "{" + ",".join('"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"' for v in values) + "}"


def cpu_ticks() -> dict[str, int]:
    """Where this machine's CPU time went so far, in clock ticks (/proc/stat): CPU used by this process, by
    PostgreSQL's processes, by every other process, and stolen by the hypervisor. A slow stretch with much
    steal or CPU of other processes was the machine, not the search."""
    ticks = {"bench": 0, "postgres": 0, "others": 0, "steal": _steal()}
    try:
        stats = list(Path("/proc").glob("[0-9]*/stat"))
    except OSError:
        return ticks  # not Linux: no attribution
    for stat in stats:
        try:
            name, rest = stat.read_text().rsplit(")", 1)
        except OSError:
            continue  # the process ended meanwhile
        fields = rest.split()
        used = int(fields[11]) + int(fields[12])
        owner = "bench" if stat.parent.name == str(os.getpid()) else None
        ticks[owner or ("postgres" if name.endswith("(postgres") else "others")] += used
    return ticks


TICK_MS = 1000 / os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 10.0


def measure(
    client: Client,
    queries: list[str],
    rounds: int,
    slowest: list[tuple[float, str, str, str, int]] | None = None,
    buffers: BufferMeter | None = None,
    partial: Counter[tuple[str, str]] | None = None,
) -> tuple[dict[tuple[str, str], list[float]], dict[tuple[str, str], dict[str, float]]]:
    """Per mode and filter: each request's milliseconds, and the CPU milliseconds (cpu_ticks) spent meanwhile
    (and with `buffers`, the shared buffers the cell's requests hit and read, sampled outside the CPU's window;
    with `partial`, how many answers said they were partial: the keyword search's budget ran out)."""
    timings: dict[tuple[str, str], list[float]] = {}
    cpu: dict[tuple[str, str], dict[str, float]] = {}
    for _ in range(rounds):
        for mode in MODES:
            for label, params in FILTERS.items():
                if buffers is not None:
                    buffers.mark()
                before = cpu_ticks()
                for q in queries:
                    stolen = _steal()
                    started = time.perf_counter()
                    response = client.get("/api/v1/search", {"q": q, "mode": mode, "limit": 20, **params})
                    elapsed = (time.perf_counter() - started) * 1000
                    if response.status_code != 200:
                        raise SystemExit(f"search failed: {response.status_code} {response.content[:300]}")
                    timings.setdefault((mode, label), []).append(elapsed)
                    if partial is not None:
                        partial[mode, label] += bool(response.json().get("partial"))
                    if slowest is not None:
                        slowest.append((elapsed, mode, label, q, _steal() - stolen))
                after = cpu_ticks()
                if buffers is not None:
                    buffers.add(f"{mode} {label}", len(queries))
                spent = cpu.setdefault((mode, label), dict.fromkeys(before, 0.0))
                for key in before:
                    spent[key] += (after[key] - before[key]) * TICK_MS
    return timings, cpu


def _steal() -> int:
    """Clock ticks the hypervisor has taken from this machine's CPUs since boot (0 where /proc/stat is absent)."""
    try:
        return int(Path("/proc/stat").read_text().split("\n", 1)[0].split()[8])
    except (OSError, IndexError):
        return 0


def filtered_recall(queries: list[str]) -> dict[str, float]:
    """Filtered semantic search (the product path) against an exact search over the same filtered rows."""
    floor = semantic_floor()
    recall: dict[str, list[float]] = {}
    for label, chosen in FILTERS.items():
        if not chosen:
            continue
        params = {"broadcast_type": None, "domain": None, **chosen}
        for q in queries:
            vector = embed([q]).value[0]
            got = {pk for pk, _ in semantic_candidates(embedding=vector, min_similarity=floor, depth=20, **params)}
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute("SET LOCAL enable_indexscan = off")
                exact = {
                    pk for pk, _ in semantic_candidates(embedding=vector, min_similarity=floor, depth=20, **params)
                }
            if exact:
                recall.setdefault(label, []).append(len(got & exact) / len(exact))
    return {label: statistics.mean(values) for label, values in recall.items()}


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000", help="network sizes to measure, ascending")
    parser.add_argument("--rounds", type=int, default=2, help="passes over the query set per mode and filter")
    parser.add_argument(
        "--keep", action="store_true", help="keep the scratch database afterwards and reuse the items it already has"
    )
    parser.add_argument(
        "--live",
        type=int,
        default=2000,
        help="how many of the newest items to write ten per transaction after the bulk load (default 2000)",
    )
    parser.add_argument("--slowest", type=int, default=0, help="also print the N slowest requests (mode, filter, q)")
    parser.add_argument(
        "--seeded",
        choices=("10k", "100k", "1M"),
        help="measure bench/seed.py's network of this scale instead of seeding one (it only gains an agent)",
    )
    return parser.parse_args()


def main() -> None:
    args = arguments()
    sizes = [int(size) for size in args.sizes.split(",")]
    settings.RATE_LIMIT_READ_PER_MINUTE = 0
    settings.RATE_LIMIT_SEARCH_EMBEDDINGS_PER_MINUTE = 0
    docs = [json.loads(line) for line in (ROOT / "bench" / "data" / "search_corpus.jsonl").open(encoding="utf-8")]
    queries = [json.loads(line)["q"] for line in (ROOT / "bench" / "data" / "search_queries.jsonl").open()]
    queries += EXTRA_QUERIES
    rng = random.Random(7)
    if args.seeded:  # bench/seed.py's network, as it is: nothing seeded here, nothing dropped at the end
        old_name = use_seeded(args.seeded)
        args.keep = True
        sizes = [ProcessedItem.objects.count()]
    else:
        connection.settings_dict["TEST"]["NAME"] = SCRATCH_DB
        old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=args.keep, serialize=False)
        require_space("run without --keep once")
    vectors = np.asarray(embed([doc["content"] for doc in docs]).value, dtype=np.float32)
    rows = []
    recalls = {}
    memory: dict[int, str] = {}
    seeded = ProcessedItem.objects.count()
    slowest: list[tuple[float, str, str, str, int]] = []
    try:
        agent = agent_create(name=f"bench-search-{seeded}-{os.getpid()}")  # unique: a kept database keeps its agents
        client = Client(HTTP_AUTHORIZATION=f"Bearer {agent_token_create(agent=agent).token}")
        for size in sizes:
            if size > seeded:
                live = min(args.live, size - seeded)
                seconds = seed(seeded, size - seeded, live, docs, vectors, agent.pk, rng)
                seeded = size
                print(f"seeded {size:,} items in {seconds:.0f} s (the newest {live:,} ten per transaction)", flush=True)
            elif size < seeded:
                raise SystemExit(f"the kept scratch database already has {seeded:,} items; ask for sizes >= that")
            # The network's files in the page cache (a server that has been serving holds them), then the caches,
            # the query embedder and the Chinese segmenter (each loads once per process).
            tables = [ProcessedItem._meta.db_table, RawItem._meta.db_table]
            print(f"page cache: {page_cache_warm(tables):.1f} GB of the items' tables and indexes read first")
            measure(client, [*queries[:10], "今天天气很好"], 1)
            buffers, partial = BufferMeter(), Counter()
            timings, cpu = measure(
                client, queries, args.rounds, slowest if size == sizes[-1] else None, buffers, partial
            )
            memory[size] = memory_report()
            recalls[size] = filtered_recall(queries[:40])
            for (mode, label), values in timings.items():
                spent = [cpu[mode, label][key] / len(values) for key in ("bench", "postgres", "others", "steal")]
                spent += [*buffers.per_request(f"{mode} {label}"), partial[mode, label]]
                rows.append((size, mode, label, len(values), statistics.median(values), pct(values, 0.99), *spent))
                print(f"  {size:,} {mode} {label}: p50 {rows[-1][4]:.1f} ms, p99 {rows[-1][5]:.1f} ms", flush=True)
    finally:
        if args.keep:
            connection.close()
            connection.settings_dict["NAME"] = old_name
        else:
            connection.creation.destroy_test_db(old_name, verbosity=0)
    shown = {"queries": len(queries), "rounds": args.rounds, "top": args.slowest, "largest": sizes[-1]}
    report(rows, recalls, memory, slowest, **shown)


def report(
    rows: list, recalls: dict, memory: dict, slowest: list, *, queries: int, rounds: int, top: int, largest: int
) -> None:
    print(f"\nSearch latency through the API (in-process client), {queries} queries x {rounds} rounds")
    print("and the CPU spent meanwhile, ms per request: this process, PostgreSQL, other processes, hypervisor steal;")
    print("then PostgreSQL's shared buffers (8 KB) per request: found in its pool (hit) and read into it (read);")
    print("and how many answers were partial (the keyword search ran out of SEARCH_KEYWORD_BUDGET_MS)")
    print(
        f"{'items':>8}  {'mode':<9}{'filter':<16}{'requests':>9}{'p50 ms':>9}{'p99 ms':>9}"
        f"{'bench':>8}{'pg':>7}{'others':>8}{'steal':>7}{'hit':>8}{'read':>7}{'partial':>8}"
    )
    print("-" * 113)
    for size, mode, label, n, p50, p99, *spent in rows:
        used = "".join(f"{value:>{width}.1f}" for value, width in zip(spent[:4], (8, 7, 8, 7), strict=True))
        counts = f"{spent[4]:>8.0f}{spent[5]:>7.0f}{spent[6]:>8}"
        print(f"{size:>8,}  {mode:<9}{label:<16}{n:>9}{p50:>9.1f}{p99:>9.1f}{used}{counts}")
    for size, described in memory.items():
        print(f"memory at {size:,} items: {described}")
    worst = max(rows, key=lambda row: row[5])
    print(f"target: p99 <= 100 ms for every mode at the largest size; worst {worst[5]:.1f} ms ({worst[1]}, {worst[2]})")
    for size, values in recalls.items():
        shown = ", ".join(f"{label} {value:.1%}" for label, value in values.items())
        print(f"filtered semantic recall@20 vs an exact search at {size:,} items: {shown}")
    if top:
        print(f"\nslowest {top} requests at {largest:,} items (steal: CPU the hypervisor took meanwhile)")
        for elapsed, mode, label, q, stolen in sorted(slowest, reverse=True)[:top]:
            print(f"{elapsed:>9.1f} ms  {mode:<9}{label:<16}steal {stolen * TICK_MS:>4.0f} ms  {q}")


if __name__ == "__main__":
    main()
