"""PostgreSQL's CPU per statement of an enriched item: the handler's own statements, each one measured.

The embedded PostgreSQL has no pg_stat_statements (it is not in pgserver's build), so this bench measures the
statements itself: it captures the plan of one item enriched by the real consumer (bench/pipeline_floor.py:
every statement with its parameters, in its transactions), then replays it with psycopg on one connection for
N published items, step by step (a step for every item, then the next), and reads the backend's CPU time from
/proc/<pid>/schedstat (nanoseconds) around every statement, BEGIN and COMMIT. A first batch of N items is
enriched the same way unmeasured, so the HNSW graphs and the similarity search have N completed items in them.

Then more batches, each after dropping a kind of the item table's indexes for good (the per-type partial HNSW
graphs, then the main graph, then the GIN indexes), show what the completion (the statement that moves the
vector into the graphs and writes the search vector) spends on each. Dropping any of them is a product
decision (type-filtered semantic queries, semantic search, full-text search use them); this only measures.

    flock /tmp/eigenflux-bench.lock .venv/bin/python bench/pipeline_pg_statements.py [--items 300] [--spread-types]

With --spread-types each replayed item gets a broadcast type drawn with a network's shares (the captured item's
type replaced wherever the plan has it), so the per-type graphs hold about a quarter of the items each, as in a
network; without it every item has the captured item's type, one per-type graph holds them all and the others
stay empty (the similarity search's walks of the empty graphs then cost next to nothing).

Scratch database `eigenflux_pgstmt` (dropped and recreated), Redis db 7 (flushed).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
import urllib.request
from collections import defaultdict
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.floor_replay import _Item  # noqa: E402
from bench.pipeline_floor import Plan, capture_with_settings, floor_items  # noqa: E402
from bench.scratch import scratch_environment  # noqa: E402

DB = "eigenflux_pgstmt"
REDIS_DB = 7


def cpu_ns(pid: int) -> int:
    """The process's time on a CPU so far, in nanoseconds (/proc/<pid>/schedstat)."""
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])


def label(sql: str) -> str:
    """A short name for a statement: its kind and the tables it writes or reads."""
    words = " ".join(sql.split())
    tables = []
    for table in ("processeditem", "moderationdecision", "llmcall", "outboxevent", "rawitem"):
        if f"items_{table}" in words or f"pipeline_{table}" in words:
            tables.append(table)
    kind = words.split(" ", 1)[0].upper()
    if "pg_advisory_xact_lock" in words:
        kind = "advisory lock"
    elif "pg_notify" in words or words.upper().startswith("NOTIFY"):
        kind = "NOTIFY"
    elif kind == "WITH":
        kind = "WITH update + inserts"
    elif "<=>" in words:
        kind = "SELECT similarity"
    return f"{kind} ({', '.join(tables)})" if tables else kind


class Replay:
    """The plan done for items on one connection, with the backend's CPU per statement added up."""

    def __init__(self, conn, plan: Plan, base_url: str):
        self.conn, self.plan, self.base_url = conn, plan, base_url
        self.pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        self.cpu: dict[str, float] = defaultdict(float)
        self.count: dict[str, int] = defaultdict(int)

    def _timed(self, name: str, run) -> None:
        before = cpu_ns(self.pid)
        run()
        self.cpu[name] += cpu_ns(self.pid) - before
        self.count[name] += 1

    def step(self, k: int, item: _Item) -> None:
        step = self.plan.steps[k]
        if step.kind == "http":
            if step.path.endswith("/embeddings"):  # the vector the later statements carry
                item.vector = self._embed(item.value(step.body))
            return
        prefix = f"{k:02d} "
        if step.atomic:
            self._timed(prefix + "BEGIN", lambda: self.conn.execute("BEGIN"))
        for n, (sql, params) in enumerate(step.statements):
            statement = item.statement(sql, params)
            self._timed(f"{prefix}{n} {label(sql)}", lambda statement=statement: self.conn.execute(*statement))
        if step.atomic:
            self._timed(prefix + "COMMIT", lambda: self.conn.execute("COMMIT"))

    def _embed(self, body: dict):
        import numpy as np

        url, headers = self.base_url + "/embeddings", {"content-type": "application/json"}
        request = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers)  # noqa: S310 - localhost
        with urllib.request.urlopen(request) as response:  # noqa: S310 - the fake server on localhost
            data = json.loads(response.read())
        return np.frombuffer(base64.b64decode(data["data"][0]["embedding"]), dtype="<f4")

    def run(self, items: list[_Item]) -> None:
        for k in range(len(self.plan.steps)):
            for item in items:
                self.step(k, item)


# A network's type shares (as bench/feed_network.py), for --spread-types.
TYPE_SHARES = (("supply", 0.35), ("demand", 0.25), ("info", 0.3), ("alert", 0.1))
SPREAD = False  # set by --spread-types


def _type_of(item_id: int) -> str | None:
    """The item's broadcast type with --spread-types (drawn from its id with the network's shares), else None:
    the captured item's, so that every item lands in one per-type graph."""
    if not SPREAD:
        return None
    point = (item_id * 2654435761 % 2**32) / 2**32
    for kind, share in TYPE_SHARES:
        point -= share
        if point < 0:
            return kind
    return TYPE_SHARES[-1][0]


def items_for(plan: Plan, rows: list[tuple[int, str, str]]) -> list[_Item]:
    shift = datetime.now().astimezone() - plan.captured_at
    return [
        _Item(plan, item_id, f"{1800000000000 + item_id}-0", content, h, shift, kind=_type_of(item_id))
        for item_id, content, h in rows
    ]


def index_saving(conn, plan: Plan, fresh_rows, base_url: str) -> list[tuple[str, float]]:
    """The completion's CPU per item as indexes are dropped one kind after another (for real: this is a scratch
    database), each batch on items of its own (`fresh_rows(tag)`), committed. Each later batch meets a larger
    main graph, so a saving shown is, if anything, less than the real one."""
    indexes = conn.execute(
        "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'items_processeditem'"
    ).fetchall()
    per_type = [name for name, sql in indexes if "hnsw" in sql and "WHERE" in sql]
    main_graph = [name for name, sql in indexes if "hnsw" in sql and "WHERE" not in sql]
    gin = [name for name, sql in indexes if "USING gin" in sql]
    steps = [
        ("every index", []),
        (f"without the {len(per_type)} per-type HNSW graphs", per_type),
        ("and without the main HNSW graph", main_graph),
        (f"and without the {len(gin)} GIN indexes ({', '.join(gin)})", gin),
    ]
    steps = [step for k, step in enumerate(steps) if k == 0 or step[1]]  # no main graph: no step for it
    results = []
    for k, (what, dropped) in enumerate(steps):
        for name in dropped:
            conn.execute(f'DROP INDEX "{name}"')
        replay = Replay(conn, plan, base_url)
        items = items_for(plan, fresh_rows(f"indexes{k}"))
        replay.run(items)
        completion = sum(v for key, v in replay.cpu.items() if "WITH update" in key and "outboxevent" in key)
        results.append((what, completion / len(items) / 1e6))
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=300, help="items measured (and as many enriched first)")
    parser.add_argument(
        "--spread-types",
        action="store_true",
        help="give the items the network's mix of broadcast types (default: every item the captured one's type, "
        "so one per-type graph holds them all)",
    )
    args = parser.parse_args()
    global SPREAD
    SPREAD = args.spread_types
    scratch_environment(DB, REDIS_DB)
    import psycopg
    from pgvector.psycopg import register_vector

    from eigenflux.base.redis import get_redis
    from items.services.agents import agent_create
    from tests.fakes.fixtures import FakeLLM
    from tests.fakes.openai_server import FakeOpenAIServer

    get_redis().flushdb()
    server = FakeOpenAIServer(safety_model="fake-safety").start()
    try:
        plan = capture_with_settings(server, FakeLLM(server))
        agents = [agent_create(name=f"pgstmt-{i}") for i in range(20)]
        conn = psycopg.connect(os.environ["DATABASE_URL"], autocommit=True)
        register_vector(conn)
        warm, _ = floor_items(args.items, agents, "warm")
        Replay(conn, plan, server.url).run(items_for(plan, warm))
        measured, _ = floor_items(args.items, agents, "measured")
        replay = Replay(conn, plan, server.url)
        replay.run(items_for(plan, measured))
        saving = index_saving(conn, plan, lambda tag: floor_items(args.items, agents, tag)[0], server.url)
    finally:
        server.stop()
        get_redis().flushdb()
    print_tables(replay, args.items, saving)
    return 0


def print_tables(replay: Replay, n: int, saving: list[tuple[str, float]]) -> None:
    total = sum(replay.cpu.values()) / n / 1e6
    mix = "the network's mix of types" if SPREAD else "all of one type"
    print(f"\nPostgreSQL CPU per enriched item by statement, {n} items ({mix}), load {os.getloadavg()[0]:.1f}")
    print("| step, statement | runs/item | CPU ms/item | share |")
    print("|---|---|---|---|")
    for key, ns in sorted(replay.cpu.items()):
        ms = ns / n / 1e6
        print(f"| {key} | {replay.count[key] / n:.1f} | {ms:.3f} | {ms / total:.0%} |")
    print(f"| total | | {total:.2f} | |")
    print("\nThe completion's statement per item, as the item table's indexes are dropped (scratch database):")
    print("| indexes | CPU ms/item |")
    print("|---|---|")
    for what, ms in saving:
        print(f"| {what} | {ms:.2f} |")


if __name__ == "__main__":
    sys.exit(main())
