"""Feed latency at scale: 100k completed items and 10k agents with reader profiles, then p50/p99 of the
personalised feeds through the real views (in-process test client: auth, ranking, SQL, impression log, JSON):
`GET /api/v1/feed?for_me=1` (first page and a cursor page), the unseen refresh (`for_me=1&unseen=1`, and the
EigenFlux client's `feed poll` refresh), and the impression write (items.services.impressions) on its own.

The network is written in bulk (COPY; the HNSW and GIN indexes built once filled), not through the pipeline:
embeddings are random unit vectors pulled towards one of a few hundred topic centroids (the local embedding is
too slow for 100k texts), so nearest-neighbour search meets realistic clusters; contents are texts of the labelled
search corpus with topic words, keywords and domains follow the topic, quality is mostly decent with a vague
tail, a tenth of the items are reposts (similarity groups), and counters, feedback, feed events and deliveries
give every reader a history. The scratch database is kept between runs (on the embedded PostgreSQL under
.data/); `--fresh` rebuilds it, `--drop` drops it.

    .venv/bin/python bench/feed_latency.py [--readers 150] [--fresh]
    .venv/bin/python bench/feed_latency.py --seeded 100k  # bench/seed.py's network instead of this one
    .venv/bin/python bench/feed_latency.py --ranker       # a learned ranker model active (deleted at the end)
    .venv/bin/python bench/feed_latency.py --seeded 1M --warm 500  # measured after 500 other readers were served

With `--ranker` a model of the current contract is stored and activated for the run: readers with history are
re-ranked by it (docs/feed-ranker.md#serving). Its weights are the formula's (what it costs does not depend on them).

The measuring part takes /tmp/eigenflux-bench.lock itself (flock), and prints the load average around it.
Before it, the network's files are read into the page cache (bench/pg_usage.py: a server that has been serving
holds them; after a restart the first pages read the graphs from the disk), and each row reports PostgreSQL's
shared buffers per request and the memory the processes hold. With `--warm N`, N other readers (never the measured
ones) are served first, so a buffer pool large enough to hold the graphs holds what a serving server's holds,
without the measured readers' own walks having been read into it.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
for name in ("LLM_API_KEY", "OPENAI_API_KEY", "LLM_PROVIDER"):
    os.environ.pop(name, None)
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "eigenflux.settings")
os.environ.setdefault("LOG_LEVEL", "WARNING")

import numpy as np  # noqa: E402
from django.conf import settings  # noqa: E402
from django.db import connection, reset_queries  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402

import eigenflux.wsgi  # noqa: E402, F401  set up as a web process is
from bench.feed_network import seed  # noqa: E402
from bench.pg_usage import BufferMeter, backend_pid, memory_report, page_cache_warm  # noqa: E402
from bench.seed import require_space, use_seeded  # noqa: E402
from eigenflux.base.redis import get_redis  # noqa: E402
from items.feed_ranking import rank_entries  # noqa: E402
from items.feed_ranking.signals import weights as formula_weights  # noqa: E402
from items.models import (  # noqa: E402
    Agent,
    FeedEvent,
    FeedName,
    ItemFeedback,
    ItemStats,
    ProcessedItem,
    RankerModel,
    ReaderProfile,
)
from items.ranker.contract import FEATURES  # noqa: E402
from items.ranker.model import model_document  # noqa: E402
from items.ranker.serving import ranker_activate, ranker_cache_clear  # noqa: E402
from items.services.agents import agent_token_create  # noqa: E402
from items.services.impressions import impressions_record  # noqa: E402
from tests.conftest import redis_url_with_db  # noqa: E402

SCRATCH_DB = os.environ.get("FEED_LATENCY_DB", "bench_eigenflux_feed_latency")
LOCK = "/tmp/eigenflux-bench.lock"
PAGE = 20


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def backend_ticks() -> int:
    """CPU clock ticks (user + system) the PostgreSQL backend serving this connection has used (Linux /proc)."""
    fields = Path(f"/proc/{backend_pid()}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def timed(client: Client, url: str, **extra) -> tuple[float, int, dict]:
    reset_queries()
    with CaptureQueriesContext(connection) as queries:
        started = time.perf_counter()
        response = client.get(url, **extra)
        elapsed = (time.perf_counter() - started) * 1000
    if response.status_code != 200:
        raise SystemExit(f"{url}: {response.status_code} {response.content[:300]!r}")
    return elapsed, len(queries), response.json()


class CpuMeter:
    """CPU time per kind of request, the bench process's own (thread_time) and its PostgreSQL backend's: what a
    request costs whatever else the machine runs (the wall-clock figures include waiting for a core)."""

    def __init__(self) -> None:
        self.python: dict[str, float] = {}
        self.postgres: dict[str, float] = {}

    def add(self, name: str, python_s: float, ticks: int) -> None:
        self.python[name] = self.python.get(name, 0.0) + python_s * 1000
        self.postgres[name] = self.postgres.get(name, 0.0) + ticks * 1000 / os.sysconf("SC_CLK_TCK")


def measure(
    readers: list[Agent], rounds: int, cpu: CpuMeter, buffers: BufferMeter
) -> dict[str, tuple[list[float], list[int]]]:
    prefix = f"/{settings.EIGENFLUX_COMPAT_PREFIX}/api/v1" if settings.EIGENFLUX_COMPAT_PREFIX else None
    results: dict[str, tuple[list[float], list[int]]] = {}
    marks = [time.thread_time(), backend_ticks()]

    def note(name: str, sample: tuple[float, int, dict]) -> dict:
        ticks = backend_ticks()
        cpu.add(name, time.thread_time() - marks[0], ticks - marks[1])
        buffers.add(name)
        results.setdefault(name, ([], []))
        results[name][0].append(sample[0])
        results[name][1].append(sample[1])
        marks[:] = [time.thread_time(), backend_ticks()]
        return sample[2]

    page_items = list(ProcessedItem.objects.order_by("-pk")[:PAGE])
    # One client, as a server process has one handler: a test Client loads the middleware chain (WhiteNoise
    # scans the static files) on its first request, a cost no served request pays.
    client = Client()
    buffers.mark()
    for _ in range(rounds):
        for reader in readers:
            auth = {"HTTP_AUTHORIZATION": f"Bearer {reader.bench_token}"}  # type: ignore[attr-defined]
            first = note("for_me, first page", timed(client, f"/api/v1/feed?for_me=1&limit={PAGE}", **auth))
            if first.get("next_cursor"):
                url = f"/api/v1/feed?for_me=1&limit={PAGE}&cursor={first['next_cursor']}"
                note("for_me, cursor page", timed(client, url, **auth))
            note("unseen refresh (native)", timed(client, f"/api/v1/feed?for_me=1&unseen=1&limit={PAGE}", **auth))
            if prefix:
                poll = f"{prefix}/items/feed?action=refresh&limit={PAGE}"
                note("feed poll refresh (client)", timed(client, poll, **auth))
            with CaptureQueriesContext(connection) as queries:
                started = time.perf_counter()
                impressions_record(reader=reader, items=page_items, feed=FeedName.FOR_ME, scores=[1.0] * PAGE)
                elapsed = (time.perf_counter() - started) * 1000
            note("impression write", (elapsed, len(queries), {}))
    return results


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--agents", type=int, default=10_000)
    parser.add_argument("--topics", type=int, default=300)
    parser.add_argument("--readers", type=int, default=150, help="readers measured (random agents)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--fresh", action="store_true", help="rebuild the kept scratch database")
    parser.add_argument("--drop", action="store_true", help="drop the scratch database at the end")
    parser.add_argument("--lock", default=LOCK, help="the lock file taken around the measuring part")
    parser.add_argument(
        "--seeded", choices=("10k", "100k", "1M"), help="measure bench/seed.py's network of this scale instead"
    )
    parser.add_argument("--ranker", action="store_true", help="a learned ranker model active while measuring")
    parser.add_argument(
        "--warm",
        type=int,
        default=0,
        help="serve this many other readers (never measured) first: a server that has been serving, its buffer pool "
        "holding what their walks read",
    )
    args = parser.parse_args()
    if args.ranker and args.seeded:
        # Activating the bench's model would retire whatever model the kept seeded network has active.
        parser.error("--ranker measures this bench's own network only, not --seeded")
    return args


def _ranker_model() -> RankerModel:
    """An active model of the current contract, weighing the formula's signals as the formula does."""
    current = formula_weights()
    weights = np.array([current.get(name, 0.0) for name in FEATURES])
    document = model_document(weights, 0.0, inputs=[], provenance={"bench": "feed_latency --ranker"})
    model = RankerModel.objects.create(contract=document["contract"], document=document, metrics={}, status="stored")
    ranker_cache_clear()
    return ranker_activate(model=model, actor="bench", reason="feed_latency --ranker")


def main() -> None:
    args = arguments()
    settings.RATE_LIMIT_READ_PER_MINUTE = 0
    url = redis_url_with_db(settings.REDIS_URL, int(os.environ.get("BENCH_REDIS_DB", "13")))
    settings.REDIS_URL = url
    redis = get_redis(url)
    redis.flushdb()
    if args.seeded:  # bench/seed.py's network as it is (it gains the readers' tokens); never dropped here
        old_name, args.drop = use_seeded(args.seeded), False
        args.items, args.agents = ProcessedItem.objects.count(), Agent.objects.count()
    else:
        connection.settings_dict["TEST"]["NAME"] = SCRATCH_DB
        old_name = connection.creation.create_test_db(
            verbosity=0, autoclobber=True, keepdb=not args.fresh, serialize=False
        )
        require_space("run with --fresh")
    try:
        if ProcessedItem.objects.count() < args.items or Agent.objects.count() < args.agents:
            if ProcessedItem.objects.exists():
                raise SystemExit("the kept scratch database is partial or smaller: run with --fresh")
            seed(args)
        rng = random.Random(7)
        profiles = list(ReaderProfile.objects.order_by("pk").values_list("pk", flat=True))
        ids = rng.sample(profiles, args.readers)
        readers = list(Agent.objects.filter(pk__in=ids))
        measured = set(ids)
        warm_ids = random.Random(11).sample([pk for pk in profiles if pk not in measured], args.warm)
        warm_readers = list(Agent.objects.filter(pk__in=warm_ids))
        for reader in readers + warm_readers:
            reader.bench_token = agent_token_create(agent=reader).token  # type: ignore[attr-defined]
        if args.ranker:
            _ranker_model()
            ranked = sum(bool(rank_entries(reader=r, page_size=PAGE, depth=PAGE)[0].ranker) for r in readers[:20])
            print(f"learned ranker active: it ranks {ranked} of {len(readers[:20])} readers (the others: no history)")
        # What a server that has been serving holds: the network's files in the page cache (a cold start reads
        # the graphs from the disk: docs/scaling.md), then caches, the lexicon and connections by a few readers.
        tables = [model._meta.db_table for model in (ProcessedItem, ReaderProfile, ItemStats, ItemFeedback, FeedEvent)]
        print(f"page cache: {page_cache_warm(tables):.1f} GB of the network's tables and indexes read first")
        measure(readers[:5], 1, CpuMeter(), BufferMeter())
        if warm_readers:
            started = time.perf_counter()
            measure(warm_readers, 1, CpuMeter(), BufferMeter())
            print(f"warmed by {len(warm_readers)} other readers in {time.perf_counter() - started:.0f} s")
        cpu, buffers = CpuMeter(), BufferMeter()
        with open(args.lock, "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            load_before = os.getloadavg()
            results = measure(readers, args.rounds, cpu, buffers)
            load_after = os.getloadavg()
            memory = memory_report()
    finally:
        if args.ranker:
            RankerModel.objects.filter(document__provenance__bench="feed_latency --ranker").delete()
        connection.close()
        connection.settings_dict["NAME"] = old_name
        if args.drop:
            connection.creation.destroy_test_db(old_name, verbosity=0)
        redis.flushdb()
    report(results, cpu, buffers, memory, args, load_before, load_after)


def report(
    results: dict,
    cpu: CpuMeter,
    buffers: BufferMeter,
    memory: str,
    args: argparse.Namespace,
    before: tuple,
    after: tuple,
) -> None:
    print(
        f"\n{args.items:,} items, {args.agents:,} agents with profiles; {len(results['for_me, first page'][0])} "
        f"requests per row; page {PAGE}; FEED_RANK_DEPTH {settings.FEED_RANK_DEPTH}; {os.cpu_count()} CPUs; "
        f"learned ranker {'active' if args.ranker else 'off'}"
    )
    print(f"load average (1/5/15 min) before {before[0]:.2f} {before[1]:.2f} {before[2]:.2f}, "
          f"after {after[0]:.2f} {after[1]:.2f} {after[2]:.2f}")  # fmt: skip
    heading = "p50 ms | p99 ms | max ms | queries | CPU ms: Python + PostgreSQL | buffers hit / read"
    print(f"\n| {'request':<28} | {heading} |")
    print(f"|{'-' * 30}|--------|--------|--------|---------|-----------------------------|--------------------|")
    for name, (values, queries) in results.items():
        python, postgres = cpu.python[name] / len(values), cpu.postgres[name] / len(values)
        hit, read = buffers.per_request(name)
        print(
            f"| {name:<28} | {statistics.median(values):6.1f} | {pct(values, 0.99):6.1f} | {max(values):6.1f} "
            f"| {statistics.median(queries):7.0f} | {python:6.1f} + {postgres:5.1f} = {python + postgres:6.1f} "
            f"| {hit:8.0f} / {read:7.0f} |"
        )
    print("CPU ms: mean per request, the bench process's thread and its PostgreSQL backend (clock ticks)")
    print("buffers: mean shared buffers (8 KB) a request found in the pool / read into it (pg_stat_database)")
    print(f"memory: {memory}")


if __name__ == "__main__":
    main()
