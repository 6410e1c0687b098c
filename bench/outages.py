"""Outages mid-run: PostgreSQL down for 60 s, later the model endpoint down for 60 s, while items keep arriving.

One `run_pipeline` (enrichment + relay, production defaults: retries 2 s / 4 s, breakers up to 8 s open)
reaches PostgreSQL through a TCP proxy that the bench takes down, and the model through the fake
OpenAI-compatible server (tests/fakes), which answers 503 to everyone during the model outage. Items are
published through the service layer at a steady rate on the bench's own database connection (the outage is
the pipeline's). Scratch database `eigenflux_outages`, Redis db 7. Prints: dead letters, how long after each
recovery the last item published before it became terminal, and model calls answered against the ideal
(one safety, one extraction, one suggestion, one embedding per completed item).

    flock /tmp/eigenflux-bench.lock .venv/bin/python bench/outages.py [--outage 60] [--rate 4]
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.scratch import scratch_environment  # noqa: E402

DB = "eigenflux_outages"
REDIS_DB = 7
TASKS = ("safety", "process_item", "suggest_action", "embed")


def setup() -> None:
    scratch_environment(DB, REDIS_DB)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--outage", type=float, default=60.0, help="seconds each dependency is down")
    parser.add_argument("--rate", type=float, default=4.0, help="items published per second")
    parser.add_argument("--latency", type=float, default=0.05, help="fake model latency per call (s)")
    args = parser.parse_args()
    setup()

    from django.db import connection

    from eigenflux.base.redis import get_redis
    from items.models import ItemStatus, ProcessedItem
    from items.services.agents import agent_create
    from items.services.publish import item_publish
    from pipeline.models import LLMCall
    from tests.fakes.fixtures import FakeLLM
    from tests.fakes.openai_server import FakeOpenAIServer, Fault
    from tests.fakes.tcp_proxy import TcpProxy
    from tests.pipeline.runtime.fixtures import database_url

    redis_client = get_redis()
    redis_client.flushdb()
    server = FakeOpenAIServer(safety_model="fake-safety").start()
    server.latency = args.latency
    params = connection.settings_dict
    host, port = params.get("HOST") or "", str(params.get("PORT") or "5432")
    proxy = TcpProxy(os.path.join(host, f".s.PGSQL.{port}") if host.startswith("/") else (host, int(port))).start()
    env = {
        **os.environ,
        **FakeLLM(server).env(),
        "DATABASE_URL": database_url({**params, "HOST": "127.0.0.1", "PORT": str(proxy.port)}),
        "LOG_LEVEL": "INFO",
    }
    log_path = Path("/tmp/eigenflux-outages-pipeline.log")
    with log_path.open("w") as log:
        pipeline = subprocess.Popen(
            [sys.executable, "manage.py", "run_pipeline", "--consumer", "item-publish", "--no-housekeeping"],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    agents = [agent_create(name=f"outage-{i}") for i in range(20)]
    published: list[tuple[int, float]] = []
    stop_publishing = threading.Event()

    def publish() -> None:
        n = 0
        while not stop_publishing.is_set():
            raw = item_publish(
                author=agents[n % len(agents)], content=f"Broadcast {n}: offering GPU hours, slot {n}."
            ).item
            published.append((raw.pk, time.time()))
            n += 1
            stop_publishing.wait(1 / args.rate)
        connection.close()

    publisher = threading.Thread(target=publish, daemon=True)
    events: dict[str, float] = {}
    try:
        publisher.start()
        time.sleep(30)
        events["postgresql down"] = time.time()
        proxy.down()
        time.sleep(args.outage)
        proxy.up()
        events["postgresql back"] = time.time()
        time.sleep(45)
        events["model down"] = time.time()
        server.outage = Fault.server_error(503)
        time.sleep(args.outage)
        server.outage = None
        events["model back"] = time.time()
        time.sleep(45)
        stop_publishing.set()
        publisher.join(10)
        ids = [pk for pk, _ in published]
        terminal = [ItemStatus.COMPLETED, ItemStatus.DISCARDED, ItemStatus.FAILED]
        deadline = time.time() + 300
        while ProcessedItem.objects.filter(pk__in=ids).exclude(status__in=terminal).exists():
            if time.time() > deadline:
                print("items still not terminal after 300 s", file=sys.stderr)
                break
            time.sleep(1)
    finally:
        stop_publishing.set()
        pipeline.send_signal(signal.SIGTERM)
        pipeline.wait(60)
        proxy.stop()
        server.stop()

    statuses = dict.fromkeys(ItemStatus.values, 0)
    for status in ProcessedItem.objects.filter(pk__in=ids).values_list("status", flat=True):
        statuses[status] += 1
    processed_at = {
        pk: ts.timestamp()
        for pk, ts in ProcessedItem.objects.filter(pk__in=ids).values_list("pk", "processed_at")
        if ts
    }

    def after_recovery(back: float) -> float:
        """Seconds from a recovery until the last item published before it was terminal."""
        before = [processed_at.get(pk, float("inf")) for pk, at in published if at < back]
        return max(before) - back if before else 0.0

    completed = statuses[ItemStatus.COMPLETED]
    answered = {task: server.answered(task) for task in TASKS}
    failed_requests = server.count() - server.answered()
    letters = redis_client.xlen("{stream:item:publish}:dlq")
    output = log_path.read_text(errors="replace")
    paused = len(re.findall(r"paused without spending a delivery", output))
    print(
        f"\n{len(ids)} items published at {args.rate}/s over {published[-1][1] - published[0][1]:.0f} s; "
        f"outages of {args.outage:.0f} s; statuses: " + ", ".join(f"{k} {v}" for k, v in statuses.items() if v)
    )
    for name, at in events.items():
        print(f"  {datetime.fromtimestamp(at):%H:%M:%S} {name}")
    print("\n| What | Figure |\n|---|---|")
    print(f"| dead letters (`{{stream:item:publish}}:dlq`) | {letters} |")
    print(f"| items failed | {statuses[ItemStatus.FAILED]} |")
    for dependency, back in (("PostgreSQL", "postgresql back"), ("the model", "model back")):
        lag = after_recovery(events[back])
        print(f"| every item published before {dependency} came back is terminal after | {lag:.1f} s |")
    ideal = 4 * completed
    total = sum(answered.values())
    print(f"| model calls answered / ideal (4 per completed item) | {total} / {ideal} = {total / ideal:.4f}x |")
    print(f"| per task answered | {', '.join(f'{t} {n}' for t, n in answered.items())} |")
    print(f"| requests refused during the model outage (503, not billed) | {failed_requests} |")
    print(f"| entries paused without spending a delivery (log lines) | {paused} |")
    print(f"| LLMCall rows | {LLMCall.objects.count()} |")
    return 0 if letters == 0 and total <= ideal * 1.01 else 1


if __name__ == "__main__":
    sys.exit(main())
