"""Soak: many items through the whole pipeline (local analyzer), printing table and Redis key sizes as it goes.

Everything that grows with traffic must stay flat except the items themselves (raw and processed items,
their decisions and stats). Scratch database `eigenflux_soak` on the configured server and Redis db 8 (flushed
at the start). Items are published through the service layer (`item_publish`, the same transaction as the API,
without HTTP), a block at a time, keeping the backlog under --backlog; `--pipelines` run_pipeline processes
(every consumer, the relay, housekeeping) enrich them with the local analyzer. The maintenance job's function
(pipeline.scheduled_jobs.maintenance_run, the rq job without the scheduling) runs every --maintenance seconds,
with retention windows shortened to minutes so that a run of an hour shows them at work.

    flock /tmp/eigenflux-bench.lock .venv/bin/python bench/soak.py [--items 100000] [--pipelines 2]
"""

from __future__ import annotations

import argparse
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.scratch import scratch_environment  # noqa: E402
from pipeline.streams import dlq_seen_key, dlq_stream  # noqa: E402

SOAK_DB = "eigenflux_soak"
REDIS_DB = 8

# Retention windows for the soak (the defaults are hours or days; see docs/configuration.md).
RETENTION = {
    "OUTBOX_RETENTION_HOURS": "0.05",  # floored at twice the sweeper deadline (~6 min)
    "CONSUMED_EVENT_RETENTION_HOURS": "0.05",
    "LLM_CALL_RETENTION_HOURS": "0.05",
    "AUDIT_RETENTION_DAYS": "0.004",  # default: keep (0); set here to show it can be bounded
    "DEAD_LETTER_RETENTION_DAYS": "0.004",
    "PIPELINE_STREAM_MIN_RETENTION_SECONDS": "60",
    "PIPELINE_TRIM_INTERVAL_SECONDS": "15",
    "PIPELINE_CONSUMER_PRUNE_SECONDS": "60",
}
TABLES = [
    ("items_rawitem", "item"),
    ("items_processeditem", "item"),
    ("items_moderationdecision", "item"),
    ("items_outboxevent", "bounded"),
    ("pipeline_consumedevent", "bounded"),
    ("pipeline_llmcall", "bounded"),
    ("pipeline_llmcallhourly", "per hour"),
    ("pipeline_auditevent", "bounded"),
    ("pipeline_deadletter", "bounded"),
    ("items_idempotencykey", "bounded"),
    ("items_message", "per agent"),
    ("django_session", "bounded"),
]
STREAMS = ["stream:item:publish", "stream:item:events", "stream:profile:update", "stream:item:stats"]
WORDS = (
    "gpu",
    "rental",
    "offer",
    "need",
    "help",
    "rust",
    "reviewer",
    "postgres",
    "migration",
    "dataset",
    "labeling",
    "kubernetes",
    "cluster",
    "frankfurt",
    "berlin",
    "tokyo",
    "weekend",
    "urgent",
    "audit",
    "contract",
    "translation",
    "japanese",
    "design",
    "logo",
    "research",
    "paper",
    "summary",
    "model",
    "fine-tuning",
    "inference",
    "latency",
    "benchmark",
    "storage",
    "backup",
    "outage",
    "alert",
    "power",
    "sensor",
    "data",
    "pipeline",
    "streaming",
    "analytics",
    "dashboard",
    "volunteer",
    "meetup",
    "conference",
    "ticket",
    "sale",
    "bike",
)


def setup_environment() -> dict[str, str]:
    """A migrated scratch database with the local analyzer and short retention windows; Django set up on it."""
    return scratch_environment(SOAK_DB, REDIS_DB, LLM_PROVIDER="local", LLM_API_KEY="", OPENAI_API_KEY="", **RETENTION)


def text(rng: random.Random, n: int) -> str:
    words = rng.sample(WORDS, 9)
    return f"{words[0].capitalize()} {' '.join(words[1:6])} for {words[6]} {words[7]} — request {n}, {words[8]}."


def sizes(client) -> dict[str, tuple[int, int]]:
    """Rows and bytes of each table, entries of each stream, Redis keys and memory."""
    from django.db import connection

    out: dict[str, tuple[int, int]] = {}
    with connection.cursor() as cursor:
        for table, _ in TABLES:
            cursor.execute(f"SELECT count(*), pg_total_relation_size('{table}') FROM {table}")  # noqa: S608
            out[table] = tuple(cursor.fetchone())
    for stream in STREAMS:
        out[stream] = (client.xlen(stream), 0)
        out[dlq_stream(stream)] = (client.xlen(dlq_stream(stream)), 0)
        seen = dlq_seen_key(stream)
        out[seen] = (client.zcard(seen) if client.type(seen) == "zset" else client.scard(seen), 0)
    consumers = 0
    for stream in STREAMS:
        if client.exists(stream):
            for group in client.xinfo_groups(stream):
                consumers += len(client.xinfo_consumers(stream, group["name"]))
    out["consumers in groups"] = (consumers, 0)
    out["redis keys (db)"] = (client.dbsize(), 0)
    out["redis used_memory"] = (0, client.info("memory")["used_memory"])
    return out


def terminal_items() -> int:
    from items.models import ItemStatus, ProcessedItem

    return ProcessedItem.objects.filter(
        status__in=[ItemStatus.COMPLETED, ItemStatus.DISCARDED, ItemStatus.FAILED]
    ).count()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--agents", type=int, default=200)
    parser.add_argument("--pipelines", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--backlog", type=int, default=2000, help="items published but not terminal, at most")
    parser.add_argument("--maintenance", type=float, default=60.0, help="seconds between maintenance runs")
    parser.add_argument("--settle", type=float, default=420.0, help="seconds after the last item, then measure")
    args = parser.parse_args()

    env = setup_environment()
    from eigenflux.base.redis import get_redis
    from items.services.agents import agent_create
    from items.services.publish import item_publish
    from pipeline.scheduled_jobs import maintenance_run

    client = get_redis(env["REDIS_URL"])
    client.flushdb()
    rng = random.Random(42)
    agents = [agent_create(name=f"soak-{i}") for i in range(args.agents)]
    snapshots = [("start", sizes(client))]
    pipelines = [
        subprocess.Popen(
            [sys.executable, "manage.py", "run_pipeline", "--concurrency", str(args.concurrency)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=open(f"/tmp/eigenflux-soak-{i}.log", "w"),  # noqa: SIM115 - closed with the process
        )
        for i in range(args.pipelines)
    ]
    started = time.monotonic()
    published = 0
    next_maintenance = time.monotonic() + args.maintenance
    marks = {args.items * q // 4 for q in (1, 2, 3)}
    try:
        while True:
            terminal = terminal_items()
            while published < args.items and published - terminal < args.backlog:
                for _ in range(min(200, args.items - published)):
                    item_publish(author=rng.choice(agents), content=text(rng, published))
                    published += 1
                    if published in marks:
                        snapshots.append((f"{published // 1000}k published", sizes(client)))
                terminal = terminal_items()
            if time.monotonic() >= next_maintenance:
                maintenance_run()
                next_maintenance = time.monotonic() + args.maintenance
            elapsed = time.monotonic() - started
            print(f"{elapsed:7.0f}s published {published:,}  terminal {terminal:,}", flush=True)
            if terminal >= args.items:
                break
            if any(p.poll() is not None for p in pipelines):
                print("a run_pipeline process exited; see /tmp/eigenflux-soak-*.log", file=sys.stderr)
                return 1
            time.sleep(5)
        snapshots.append(("all terminal", sizes(client)))
        run_seconds = time.monotonic() - started
        settle_until = time.monotonic() + args.settle
        while time.monotonic() < settle_until:  # traffic stopped: the windows pass, housekeeping and jobs run
            time.sleep(min(args.maintenance, max(0.0, settle_until - time.monotonic())))
            maintenance_run()
        snapshots.append((f"+{args.settle:.0f}s", sizes(client)))
    finally:
        for process in pipelines:
            process.send_signal(signal.SIGTERM)
        for process in pipelines:
            process.wait(60)

    from items.models import ItemStatus, ProcessedItem

    statuses = {s: ProcessedItem.objects.filter(status=s).count() for s in ItemStatus.values}
    print(
        f"\n{args.items:,} items in {run_seconds:.0f}s ({args.items / run_seconds:.1f} items/s), {args.pipelines} "
        f"run_pipeline x concurrency {args.concurrency}; statuses: "
        + ", ".join(f"{k} {v:,}" for k, v in statuses.items() if v)
    )
    kinds = dict(TABLES)
    print("\n| what | grows with | " + " | ".join(name for name, _ in snapshots) + " |")
    print("|---|---|" + "---:|" * len(snapshots))
    for key in snapshots[0][1]:
        cells = []
        for _, snap in snapshots:
            rows, size = snap[key]
            if key == "redis used_memory":
                cells.append(f"{size / 1e6:.1f} MB")
            elif key in kinds:
                cells.append(f"{rows:,} ({size / 1e6:.1f} MB)")
            else:
                cells.append(f"{rows:,}")
        kind = kinds.get(key, "bounded")
        print(f"| `{key}` | {kind} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
