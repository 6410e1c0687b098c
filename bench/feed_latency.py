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

The measuring part takes /tmp/eigenflux-bench.lock itself (flock), and prints the load average around it.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import io
import json
import os
import random
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
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
from eigenflux.base.redis import get_redis  # noqa: E402
from items.models import (  # noqa: E402
    Agent,
    FeedDelivery,
    FeedEvent,
    FeedName,
    ItemFeedback,
    ItemStats,
    ProcessedItem,
    RawItem,
    ReaderProfile,
)
from items.services.agents import agent_token_create  # noqa: E402
from items.services.impressions import impressions_record  # noqa: E402
from tests.conftest import redis_url_with_db  # noqa: E402

SCRATCH_DB = os.environ.get("FEED_LATENCY_DB", "bench_eigenflux_feed_latency")
LOCK = "/tmp/eigenflux-bench.lock"
TYPES = (("supply", 0.35), ("demand", 0.25), ("info", 0.3), ("alert", 0.1))
DOMAINS = [f"domain{n}" for n in range(40)]
NOW = datetime(2026, 12, 1, tzinfo=UTC)
SPAN_DAYS = 60
PAGE = 20


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _escape(value) -> str:
    if value is None:
        return "\\N"
    return str(value).replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def _row(values: list) -> str:
    return "\t".join(_escape(value) for value in values) + "\n"


def _array(values: list[str]) -> str:
    return "{" + ",".join('"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"' for v in values) + "}"


def _vector(values: np.ndarray) -> str:
    return "[" + ",".join(f"{x:.4f}" for x in values) + "]"


class World:
    """Topic centroids and the random draws shared by items and readers."""

    def __init__(self, topics: int, seed: int = 29) -> None:
        self.rng = random.Random(seed)
        self.np = np.random.default_rng(seed)
        dims = settings.EMBEDDING_DIMENSIONS
        centroids = self.np.standard_normal((topics, dims)).astype(np.float32)
        self.centroids = centroids / np.linalg.norm(centroids, axis=1, keepdims=True)
        self.topics = topics
        corpus = ROOT / "bench" / "data" / "search_corpus.jsonl"
        self.texts = [json.loads(line)["content"] for line in corpus.open(encoding="utf-8") if line.strip()]

    def near(self, topic: int, spread: float) -> np.ndarray:
        noise = self.np.standard_normal(self.centroids.shape[1]).astype(np.float32)
        vector = self.centroids[topic] + spread * noise / np.sqrt(len(noise))
        return vector / np.linalg.norm(vector)

    def words(self, topic: int, count: int) -> list[str]:
        return [f"t{topic}w{self.rng.randrange(12)}" for _ in range(count)]

    def domains(self, topic: int) -> list[str]:
        first = DOMAINS[topic % len(DOMAINS)]
        return [first] if self.rng.random() < 0.6 else [first, self.rng.choice(DOMAINS)]


def _copy(cursor, table: str, columns: str, buffer: io.StringIO) -> None:
    with cursor.connection.cursor().copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
        copy.write(buffer.getvalue())


def seed_agents(world: World, count: int) -> tuple[int, list[int]]:
    """`count` agents with bio / seeks / offers, keywords and a ReaderProfile (seeks and offers vectors, and a
    clause vector per want for a fifth of them). Returns the first id less one, and each agent's seeks topic."""
    agents, profiles = io.StringIO(), io.StringIO()
    seeks_topics = []
    stamp = NOW.isoformat()
    base = Agent.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
    for n in range(base + 1, base + count + 1):
        seeks, offers = world.rng.randrange(world.topics), world.rng.randrange(world.topics)
        seeks_topics.append(seeks)
        keywords = world.words(seeks, 3) + world.words(offers, 2)
        text = world.rng.choice(world.texts)
        agents.write(
            _row(
                [n, f"feedbench-{n}", f"feedbench-{n}", f"feedbench-{n}", "f", "t", text[:200],
                 " ".join(world.words(offers, 4)), " ".join(world.words(seeks, 4)), _array(keywords), "{}",
                 stamp, stamp, stamp]
            )
        )  # fmt: skip
        parts_seeks = [world.near(seeks, 1.0).tolist() for _ in range(2)] if n % 5 == 0 else []
        profiles.write(
            _row(
                [n, _vector(world.near(seeks, 0.6)), _vector(world.near(offers, 0.6)),
                 json.dumps([[round(x, 4) for x in part] for part in parts_seeks]), "[]", stamp, stamp]
            )
        )  # fmt: skip
    with connection.cursor() as cursor:
        _copy(
            cursor,
            Agent._meta.db_table,
            "id, name, name_key, name_shape_key, is_official, is_active, bio, offers, seeks, profile_keywords, "
            "country_codes, profile_keywords_version, created_at, updated_at",
            agents,
        )
        _copy(
            cursor,
            ReaderProfile._meta.db_table,
            "agent_id, seeks_embedding, offers_embedding, seeks_parts, offers_parts, version, updated_at",
            profiles,
        )
        cursor.execute(f"SELECT setval(pg_get_serial_sequence('{Agent._meta.db_table}', 'id'), {base + count})")
    return base, seeks_topics


def _item_rows(
    world: World, count: int, agents: int, base: int
) -> tuple[io.StringIO, io.StringIO, io.StringIO, list[int]]:
    raws, processed, stats = io.StringIO(), io.StringIO(), io.StringIO()
    kinds, shares = zip(*TYPES, strict=True)
    by_topic: dict[int, list[int]] = {}
    topic_of = []
    for pk in range(1, count + 1):
        topic = world.rng.randrange(world.topics)
        topic_of.append(topic)
        at = NOW - timedelta(days=SPAN_DAYS * (1 - pk / count), seconds=world.rng.randrange(60))
        group = pk
        earlier = by_topic.setdefault(topic, [])
        if earlier and world.rng.random() < 0.1:
            group = world.rng.choice(earlier[-20:])  # a repost of a recent item of its topic
        earlier.append(pk)
        content = f"{world.rng.choice(world.texts)} {' '.join(world.words(topic, 5))}"
        kind = world.rng.choices(kinds, shares)[0]
        quality = min(1.0, max(0.05, world.rng.betavariate(5, 2)))
        author = base + min(agents, int(world.rng.paretovariate(1.2)) + world.rng.randrange(agents) // 3)
        expire = (at + timedelta(days=3)).isoformat() if kind == "alert" else None
        digest = hashlib.sha256(content.encode()).hexdigest()
        raws.write(_row([pk, author, content, "", "", None, digest, at.isoformat()]))
        processed.write(
            _row(
                [pk, author, "completed", kind, content[:120], _array(world.words(topic, 4)),
                 _array(world.domains(topic)), "en", round(quality, 3), group, _vector(world.near(topic, 1.0)),
                 "local", at.isoformat(), at.isoformat(), at.isoformat(), expire, "", "", "", "", "", "", 0, "", ""]
            )
        )  # fmt: skip
        if world.rng.random() < 0.6:
            readers = int(world.np.poisson(3))
            ones, twos, minus = readers // 2, readers // 4, readers - readers // 2 - readers // 4
            touched = at + timedelta(hours=world.rng.random() * 48)
            stats.write(
                _row([pk, readers, ones + 2 * twos - minus, minus, 0, ones, twos, int(world.np.poisson(8)),
                      min(touched, NOW).isoformat()])
            )  # fmt: skip
    return raws, processed, stats, topic_of


PROCESSED_COLUMNS = (
    "raw_id, author_id, status, broadcast_type, summary, keywords, domains, lang, quality, group_id, embedding, "
    "analyzer, created_at, processed_at, updated_at, expire_time, reason, timeliness, geo, source_type, "
    "expected_response, suggestion, attempts, last_error, claimed_by"
)


def seed_items(world: World, count: int, agents: int, base: int) -> list[int]:
    raws, processed, stats, topic_of = _item_rows(world, count, agents, base)
    rebuilt = [
        index
        for index in ProcessedItem._meta.indexes
        if index.name in ("processed_search", "processed_domains") or "hnsw" in index.name
    ]
    with connection.cursor() as cursor:
        for index in rebuilt:
            cursor.execute(f"DROP INDEX IF EXISTS {index.name}")
        _copy(
            cursor,
            RawItem._meta.db_table,
            "id, author_id, content, notes, url, accept_reply, content_hash, created_at",
            raws,
        )
        _copy(cursor, ProcessedItem._meta.db_table, PROCESSED_COLUMNS, processed)
        _copy(
            cursor,
            ItemStats._meta.db_table,
            "item_id, readers, score_sum, score_minus_one, score_zero, score_one, score_two, consumed, updated_at",
            stats,
        )
        cursor.execute(f"SELECT setval(pg_get_serial_sequence('{RawItem._meta.db_table}', 'id'), {count})")
        cursor.execute("SET maintenance_work_mem = '512MB'")
    started = time.perf_counter()
    with connection.schema_editor(atomic=False) as editor:
        for index in rebuilt:
            editor.add_index(ProcessedItem, index)
    print(f"  indexes built in {time.perf_counter() - started:.0f} s", flush=True)
    return topic_of


def seed_history(world: World, base: int, seeks_topics: list[int], topic_of: list[int]) -> None:
    """Per reader: ~20 scores and ~5 feed events on items of its seeks topic (and some others), ~30 deliveries."""
    items_of: dict[int, list[int]] = {}
    for pk, topic in enumerate(topic_of, start=1):
        items_of.setdefault(topic, []).append(pk)
    feedback, events, deliveries = io.StringIO(), io.StringIO(), io.StringIO()
    everything = len(topic_of)
    for agent, topic in enumerate(seeks_topics, start=base + 1):
        own = items_of.get(topic) or [1]
        chosen = {world.rng.choice(own) for _ in range(15)} | {world.rng.randrange(1, everything + 1) for _ in range(5)}
        for pk in chosen:
            score = world.rng.choices((-1, 0, 1, 2), (0.15, 0.25, 0.4, 0.2))[0]
            at = (NOW - timedelta(hours=world.rng.random() * 24 * SPAN_DAYS)).isoformat()
            feedback.write(_row([agent, pk, score, f"fb-{agent}-{pk}", at, at]))
        for n, pk in enumerate(list(chosen)[:5]):
            kind = world.rng.choice(("surface", "question", "discussion", "task"))
            at = (NOW - timedelta(hours=world.rng.random() * 24 * SPAN_DAYS)).isoformat()
            events.write(_row([agent, pk, kind, "", f"ev-{n}", "", "", at]))
        for pk in {world.rng.randrange(int(everything * 0.8), everything + 1) for _ in range(30)}:
            at = (NOW - timedelta(hours=world.rng.random() * 24 * 10)).isoformat()
            deliveries.write(_row([agent, pk, pk, f"imp_seed_{agent}", at]))
    with connection.cursor() as cursor:
        _copy(
            cursor, ItemFeedback._meta.db_table, "reader_id, item_id, score, event_id, created_at, updated_at", feedback
        )
        _copy(
            cursor,
            FeedEvent._meta.db_table,
            "agent_id, item_id, kind, impression_id, dedup_key, brief, channel, created_at",
            events,
        )
        _copy(
            cursor, FeedDelivery._meta.db_table, "agent_id, item_id, group_id, impression_id, delivered_at", deliveries
        )


def seed(args: argparse.Namespace) -> None:
    started = time.perf_counter()
    world = World(args.topics)
    base, seeks_topics = seed_agents(world, args.agents)
    print(f"  {args.agents:,} agents with profiles in {time.perf_counter() - started:.0f} s", flush=True)
    topic_of = seed_items(world, args.items, args.agents, base)
    print(f"  {args.items:,} items in {time.perf_counter() - started:.0f} s", flush=True)
    seed_history(world, base, seeks_topics, topic_of)
    with connection.cursor() as cursor:
        for model in (Agent, ReaderProfile, RawItem, ProcessedItem, ItemStats, ItemFeedback, FeedEvent, FeedDelivery):
            cursor.execute(f"VACUUM ANALYZE {model._meta.db_table}")
    print(f"seeded in {time.perf_counter() - started:.0f} s", flush=True)


def backend_ticks() -> int:
    """CPU clock ticks (user + system) the PostgreSQL backend serving this connection has used (Linux /proc)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
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


def measure(readers: list[Agent], rounds: int, cpu: CpuMeter) -> dict[str, tuple[list[float], list[int]]]:
    prefix = f"/{settings.EIGENFLUX_COMPAT_PREFIX}/api/v1" if settings.EIGENFLUX_COMPAT_PREFIX else None
    results: dict[str, tuple[list[float], list[int]]] = {}
    marks = [time.thread_time(), backend_ticks()]

    def note(name: str, sample: tuple[float, int, dict]) -> dict:
        ticks = backend_ticks()
        cpu.add(name, time.thread_time() - marks[0], ticks - marks[1])
        results.setdefault(name, ([], []))
        results[name][0].append(sample[0])
        results[name][1].append(sample[1])
        marks[:] = [time.thread_time(), backend_ticks()]
        return sample[2]

    page_items = list(ProcessedItem.objects.order_by("-pk")[:PAGE])
    for _ in range(rounds):
        for reader in readers:
            client = Client(HTTP_AUTHORIZATION=f"Bearer {reader.bench_token}")  # type: ignore[attr-defined]
            first = note("for_me, first page", timed(client, f"/api/v1/feed?for_me=1&limit={PAGE}"))
            if first.get("next_cursor"):
                url = f"/api/v1/feed?for_me=1&limit={PAGE}&cursor={first['next_cursor']}"
                note("for_me, cursor page", timed(client, url))
            note("unseen refresh (native)", timed(client, f"/api/v1/feed?for_me=1&unseen=1&limit={PAGE}"))
            if prefix:
                note("feed poll refresh (client)", timed(client, f"{prefix}/items/feed?action=refresh&limit={PAGE}"))
            with CaptureQueriesContext(connection) as queries:
                started = time.perf_counter()
                impressions_record(reader=reader, items=page_items, feed=FeedName.FOR_ME, scores=[1.0] * PAGE)
                elapsed = (time.perf_counter() - started) * 1000
            note("impression write", (elapsed, len(queries), {}))
    return results


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--agents", type=int, default=10_000)
    parser.add_argument("--topics", type=int, default=300)
    parser.add_argument("--readers", type=int, default=150, help="readers measured (random agents)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--fresh", action="store_true", help="rebuild the kept scratch database")
    parser.add_argument("--drop", action="store_true", help="drop the scratch database at the end")
    parser.add_argument("--lock", default=LOCK, help="the lock file taken around the measuring part")
    return parser.parse_args()


def main() -> None:
    args = arguments()
    settings.RATE_LIMIT_READ_PER_MINUTE = 0
    url = redis_url_with_db(settings.REDIS_URL, int(os.environ.get("BENCH_REDIS_DB", "13")))
    settings.REDIS_URL = url
    redis = get_redis(url)
    redis.flushdb()
    connection.settings_dict["TEST"]["NAME"] = SCRATCH_DB
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=not args.fresh, serialize=False)
    try:
        if ProcessedItem.objects.count() < args.items or Agent.objects.count() < args.agents:
            if ProcessedItem.objects.exists():
                raise SystemExit("the kept scratch database is partial or smaller: run with --fresh")
            seed(args)
        rng = random.Random(7)
        ids = rng.sample(list(ReaderProfile.objects.order_by("pk").values_list("pk", flat=True)), args.readers)
        readers = list(Agent.objects.filter(pk__in=ids))
        for reader in readers:
            reader.bench_token = agent_token_create(agent=reader).token  # type: ignore[attr-defined]
        measure(readers[:5], 1, CpuMeter())  # warm: caches, the lexicon, connections
        cpu = CpuMeter()
        with open(args.lock, "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            load_before = os.getloadavg()
            results = measure(readers, args.rounds, cpu)
            load_after = os.getloadavg()
    finally:
        connection.close()
        connection.settings_dict["NAME"] = old_name
        if args.drop:
            connection.creation.destroy_test_db(old_name, verbosity=0)
        redis.flushdb()
    report(results, cpu, args, load_before, load_after)


def report(results: dict, cpu: CpuMeter, args: argparse.Namespace, before: tuple, after: tuple) -> None:
    print(
        f"\n{args.items:,} items, {args.agents:,} agents with profiles; {len(results['for_me, first page'][0])} "
        f"requests per row; page {PAGE}; FEED_RANK_DEPTH {settings.FEED_RANK_DEPTH}; {os.cpu_count()} CPUs"
    )
    print(f"load average (1/5/15 min) before {before[0]:.2f} {before[1]:.2f} {before[2]:.2f}, "
          f"after {after[0]:.2f} {after[1]:.2f} {after[2]:.2f}")  # fmt: skip
    print(f"\n| {'request':<28} | p50 ms | p99 ms | max ms | queries | CPU ms: Python + PostgreSQL |")
    print(f"|{'-' * 30}|--------|--------|--------|---------|-----------------------------|")
    for name, (values, queries) in results.items():
        python, postgres = cpu.python[name] / len(values), cpu.postgres[name] / len(values)
        print(
            f"| {name:<28} | {statistics.median(values):6.1f} | {pct(values, 0.99):6.1f} | {max(values):6.1f} "
            f"| {statistics.median(queries):7.0f} | {python:6.1f} + {postgres:5.1f} = {python + postgres:6.1f} |"
        )
    print("CPU ms: mean per request, the bench process's thread and its PostgreSQL backend (clock ticks)")


if __name__ == "__main__":
    main()
