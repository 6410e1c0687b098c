"""The floor under enrichment: what an item's own work costs done directly, without Django, the SDK or the runtime.

`capture()` enriches one item through the real consumer (`ItemPublishConsumer.handle`, in this process) and
records, in order, every SQL statement it sends (with its parameters, grouped by transaction as Django ran them)
and every request the fake model server received. That is the plan. The floor then enriches N other published
items by replaying the plan with raw psycopg (async, a pool of PIPELINE_DB_POOL_MAX_SIZE connections, the same
transactions) and aiohttp (the same four requests, to the same fake server), with the same stream work: the
entries are read from the item-publish stream with XREADGROUP and acknowledged with XACK. Per item the replay
substitutes what differs: its id, its claim token, its content and content hash, fresh event UUIDs, times
shifted to now, and the embedding the fake server returned for its content, sent to PostgreSQL in binary
(pgvector's psycopg adapter). Nothing else runs: no ORM, no SDK, no runtime, no metrics, no tracing.

CPU per item is measured as for the pipeline (bench/pipeline_throughput.py): the floor process from /proc and
its PostgreSQL backends (application_name `eigenflux-floor`).

    flock /tmp/eigenflux-bench.lock .venv/bin/python bench/pipeline_floor.py [--latency 0.2] [--concurrency 32,256]
        [--sdk] [--rounds N]

`--sdk` replays the plan a second way, alternately with the first: the four requests sent through the openai
package as the pipeline sends them (bench/floor_replay.py --sdk), everything else as the floor. That is the
least a process could cost per item with the SDK as its client and no thread per item.

bench/pipeline_throughput.py runs the floor beside the pipeline, at the same concurrencies, and prints both.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pickle
import re
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

FLOOR_APPLICATION_NAME = "eigenflux-floor"
FLOOR_GROUP = "cg:bench:floor"
VECTOR_MARKER = "<the item's vector>"
CAPTURE_MESSAGE_ID = "1700000000000-7"
UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


@dataclass
class Step:
    """One transaction (its statements; `atomic` False: a single autocommit statement) or one HTTP request."""

    kind: str  # "sql" or "http"
    statements: list[tuple[str, Any]] = field(default_factory=list)
    atomic: bool = False
    path: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    body: dict[str, Any] = field(default_factory=dict)


@dataclass
class Plan:
    steps: list[Step]
    item_id: int
    token: str
    content: str
    content_hash: str
    vector_text: str
    captured_at: datetime

    @property
    def statements(self) -> int:
        return sum(len(step.statements) for step in self.steps if step.kind == "sql")

    @property
    def transactions(self) -> int:
        return sum(1 for step in self.steps if step.kind == "sql")

    @property
    def requests(self) -> int:
        return sum(1 for step in self.steps if step.kind == "http")

    def describe(self) -> str:
        lines = []
        for step in self.steps:
            if step.kind == "http":
                lines.append(f"HTTP POST {step.path}")
            else:
                lines.append(("BEGIN" if step.atomic else "autocommit") + f" ({len(step.statements)})")
                lines += [f"    {' '.join(sql.split())[:110]}" for sql, _ in step.statements]
        return "\n".join(lines)


class _Recorder:
    """An execute wrapper: records each statement with the transaction (outermost atomic block) it ran in."""

    def __init__(self) -> None:
        self.events: list[tuple[float, Any, str, Any]] = []
        self._blocks: list[object] = []

    def __call__(self, execute, sql, params, many, context):
        conn = context["connection"]
        block = None
        if conn.in_atomic_block:
            outer = conn.atomic_blocks[0]
            block = next((b for b in self._blocks if b is outer), None)
            if block is None:
                self._blocks.append(outer)
                block = outer
        self.events.append((time.time(), block, sql, params))
        return execute(sql, params, many, context)


def capture(server, raw_id: int) -> Plan:
    """Enrich item `raw_id` through the real consumer and return what it sent (`server`: the fake model server
    the settings point at; Django set up)."""
    from django.db import connection

    from eigenflux.base.redis import get_redis
    from items.blacklist_cache import blacklist_keywords
    from items.events import ITEM_PUBLISHED, STREAM_ITEM_PUBLISH
    from items.models import ProcessedItem
    from pipeline.consumers.item_publish import ItemPublishConsumer
    from pipeline.runtime.event import Event, Lease

    blacklist_keywords()  # cached in Redis, as in a running process
    get_redis()
    consumer = ItemPublishConsumer()
    consumer.handle(_warm_event(Event, Lease, ITEM_PUBLISHED, STREAM_ITEM_PUBLISH, consumer, None))
    event = _warm_event(Event, Lease, ITEM_PUBLISHED, STREAM_ITEM_PUBLISH, consumer, raw_id)
    server.requests.clear()
    recorder = _Recorder()
    with connection.execute_wrapper(recorder):
        consumer.handle(event)
    item = ProcessedItem.objects.select_related("raw").get(pk=raw_id)
    assert item.status == "completed", item.status
    timeline: list[tuple[float, str, Any]] = [
        (t, "sql", (block, sql, params)) for t, block, sql, params in recorder.events
    ]
    timeline += [(r.time, "http", r) for r in server.requests]
    timeline.sort(key=lambda entry: entry[0])
    steps: list[Step] = []
    last_block: object = None
    for _t, kind, payload in timeline:
        if kind == "http":
            headers = {k: v for k, v in payload.headers.items() if k in ("authorization", "content-type")}
            steps.append(Step("http", path=payload.path, headers=headers, body=payload.json))
            last_block = None
            continue
        block, sql, params = payload
        if block is None or block is not last_block:
            steps.append(Step("sql", atomic=block is not None))
        steps[-1].statements.append((sql, _plain(params)))
        last_block = block
    return Plan(
        steps=steps,
        item_id=raw_id,
        token=f"{CAPTURE_MESSAGE_ID}@{consumer.holder}",
        content=item.raw.content,
        content_hash=item.raw.content_hash,
        vector_text="[" + ",".join(str(float(x)) for x in item.embedding) + "]",
        captured_at=datetime.now().astimezone(),
    )


def _plain(value: Any) -> Any:
    """Parameters as plain Python values (enum members of the models become their str or int)."""
    if isinstance(value, str):
        return str(value)
    if type(value).__name__ == "BinaryVector":  # eigenflux.base.sqlrows: the replay sends the item's own vector
        return VECTOR_MARKER
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_plain(v) for v in value)
    wrapped = getattr(value, "obj", None)
    if wrapped is not None:  # psycopg's Json / Jsonb wrapper
        return type(value)(_plain(wrapped))
    return value


def _warm_event(Event, Lease, event_type, stream, consumer, raw_id):
    """The stream entry for `raw_id` (None: a fresh item of its own, enriched once to warm caches and clients)."""
    if raw_id is None:
        from items.services.agents import agent_create
        from items.services.publish import item_publish

        author = agent_create(name=f"floor-warm-{uuid.uuid4().hex[:6]}")
        raw_id = item_publish(author=author, content=f"Warm-up item {uuid.uuid4().hex}: spare GPU hours.").item.pk
        message_id = "1700000000000-1"
    else:
        message_id = CAPTURE_MESSAGE_ID
    return Event(
        stream=stream,
        group=consumer.group,
        message_id=message_id,
        delivery_count=1,
        envelope={},
        id=str(uuid.uuid4()),
        type=event_type,
        subject=str(raw_id),
        data={"item_id": str(raw_id)},
        replay=False,
        correlation_id=str(uuid.uuid4()),
        causation_id="",
        traceparent="",
        lease=Lease(),
    )


# --- driving it from a bench ------------------------------------------------------------------------------
@dataclass
class FloorResult:
    items: int
    seconds: float
    cpu_process: float
    cpu_postgres: float

    @property
    def rate(self) -> float:
        return self.items / self.seconds


def run_floor(
    plan: Plan,
    items: list[tuple[int, str, str]],
    envelopes: list[dict],
    *,
    concurrency: int,
    base_url: str,
    probe,
    sdk: bool = False,
) -> FloorResult:
    """Replay `plan` for the published `items` (id, content, content hash) in a child process, `concurrency` at
    a time; `envelopes` are their item.published entries, XADDed to a stream of the floor's own. `sdk`: the
    requests go through the openai package (floor_replay.py --sdk)."""
    from django.conf import settings

    from bench.pipeline_throughput import proc_cpu
    from eigenflux.base.redis import get_redis

    client = get_redis()
    stream = f"bench:floor:{uuid.uuid4().hex[:8]}"
    client.xgroup_create(stream, FLOOR_GROUP, id="0", mkstream=True)
    plan_path = Path(f"/tmp/eigenflux-floor-plan-{os.getpid()}.pickle")
    plan_path.write_bytes(pickle.dumps((dataclasses.asdict(plan), items)))  # plain values: no class by module path
    command = _replay_command(plan_path, stream, base_url, concurrency, settings.PIPELINE_DB_POOL_MAX_SIZE, sdk)
    proc = subprocess.Popen(command, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdin is not None
        if proc.stdout.readline().strip() != "ready":
            raise SystemExit("the floor did not start")
        cpu_start = proc_cpu(proc.pid)
        backends_start = {pid: proc_cpu(pid) for pid in probe.backends(FLOOR_APPLICATION_NAME)}
        pipe = client.pipeline(transaction=False)
        for envelope in envelopes:
            pipe.xadd(stream, {k: str(v) if not isinstance(v, dict) else json.dumps(v) for k, v in envelope.items()})
        started = time.monotonic()
        pipe.execute()
        proc.stdin.write("go\n")
        proc.stdin.flush()
        backends = probe.backends(FLOOR_APPLICATION_NAME)
        result_line = proc.stdout.readline()
        elapsed = time.monotonic() - started
        cpu_process = proc_cpu(proc.pid) - cpu_start
        cpu_postgres = sum(proc_cpu(pid) - backends_start.get(pid, 0.0) for pid in backends)
        done = json.loads(result_line)["done"]
        proc.stdin.write("done\n")
        proc.stdin.flush()
        proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        plan_path.unlink(missing_ok=True)
        client.delete(stream)
    return FloorResult(items=done, seconds=elapsed, cpu_process=cpu_process / done, cpu_postgres=cpu_postgres / done)


def _replay_command(plan_path: Path, stream: str, base_url: str, concurrency: int, pool: int, sdk: bool) -> list[str]:
    """The floor's child process (bench/floor_replay.py)."""
    command = [sys.executable, str(ROOT / "bench" / "floor_replay.py"), "--plan", str(plan_path), "--stream", stream]
    command += ["--database-url", os.environ["DATABASE_URL"], "--redis-url", os.environ["REDIS_URL"]]
    command += ["--base-url", base_url, "--concurrency", str(concurrency), "--pool", str(pool)]
    return command + (["--sdk"] if sdk else [])


def floor_items(n: int, agents: list, tag: str) -> tuple[list[tuple[int, str, str]], list[dict]]:
    """N published items for the floor (id, content, content hash) and their envelopes (taken out of the outbox)."""
    from bench.pipeline_throughput import publish
    from items.models import RawItem

    ids, envelopes = publish(n, agents, f"floor-{tag}")
    rows = RawItem.objects.filter(pk__in=ids).values_list("pk", "content", "content_hash")
    wanted = set(ids)
    return list(rows), [e for e in envelopes if int(json.loads(e["data"])["item_id"]) in wanted]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency", type=float, default=0.2, help="fake model latency per call (s)")
    parser.add_argument("--concurrency", default="32,256", help="comma list of items in flight")
    parser.add_argument("--items-per-slot", type=int, default=2)
    parser.add_argument("--min-items", type=int, default=300)
    parser.add_argument("--show-plan", action="store_true", help="print the captured statements and requests")
    parser.add_argument(
        "--sdk", action="store_true", help="also replay with the requests sent through the openai package"
    )
    parser.add_argument("--rounds", type=int, default=1, help="runs per configuration (each way, alternating)")
    args = parser.parse_args()
    from bench.pipeline_throughput import DB, REDIS_DB, Probe, setup

    del DB, REDIS_DB
    setup()
    from eigenflux.base.redis import get_redis
    from items.services.agents import agent_create
    from tests.fakes.fixtures import FakeLLM
    from tests.fakes.openai_server import FakeOpenAIServer

    get_redis().flushdb()
    server = FakeOpenAIServer(safety_model="fake-safety").start()
    try:
        plan = capture_with_settings(server, FakeLLM(server))
        if args.show_plan:
            print(plan.describe())
        server.latency = args.latency
        agents = [agent_create(name=f"floorbench-{i}") for i in range(20)]
        probe = Probe(os.environ["DATABASE_URL"])
        print(
            f"plan: {plan.transactions} transactions, {plan.statements} statements, {plan.requests} requests per item"
        )
        print("| C | requests sent with | items | items/s | CPU ms/item (proc + PG) | load |")
        print("|---|---|---|---|---|---|")
        ways = [("aiohttp", False), ("openai client.post", True)] if args.sdk else [("aiohttp", False)]
        for spec in args.concurrency.split(","):
            c = int(spec)
            n = max(args.min_items, args.items_per_slot * c)
            for r in range(args.rounds):
                for label, sdk in ways:
                    # Distinct items per run: a run must not meet the last one's as exact duplicates.
                    items, envelopes = floor_items(n, agents, f"c{c}r{r}{'sdk' if sdk else ''}")
                    result = run_floor(plan, items, envelopes, concurrency=c, base_url=server.url, probe=probe, sdk=sdk)
                    load = os.getloadavg()[0]
                    print(
                        f"| {c} | {label} | {result.items} | {result.rate:.1f} | {result.cpu_process * 1000:.1f} + "
                        f"{result.cpu_postgres * 1000:.1f} | {load:.1f} |",
                        flush=True,
                    )
    finally:
        server.stop()
        get_redis().flushdb()
    return 0


def capture_with_settings(server, fake) -> Plan:
    """capture() with this process's settings pointed at the fake server (as the pipeline's environment is)."""
    from django.test.utils import override_settings
    from django.utils import timezone

    from items.models import OutboxEvent
    from items.services.agents import agent_create
    from items.services.publish import item_publish

    author = agent_create(name=f"floor-capture-{uuid.uuid4().hex[:6]}")
    raw = item_publish(
        author=author, content=f"Capture item {uuid.uuid4().hex}: offering spare GPU hours, zone 7."
    ).item
    with override_settings(**{**fake.settings_values(), "LLM_TIMEOUT": 30.0}):
        plan = capture(server, raw.pk)
    # The capture's own outbox rows are no bench's entries.
    OutboxEvent.objects.filter(dispatched_at__isnull=True).update(dispatched_at=timezone.now())
    return plan


if __name__ == "__main__":
    sys.exit(main())
