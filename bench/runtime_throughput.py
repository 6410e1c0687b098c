"""Stream runtime throughput on a no-op handler vs a bare redis-py loop (XREADGROUP COUNT 100 + one XACK per
batch), one process, same run, same Redis. Target: runtime >= 10 % of the bare loop.

Uses the embedded (or REDIS_URL) Redis on a dedicated logical db (BENCH_REDIS_DB, default 11) and deletes only
its own keys. Run: .venv/bin/python bench/runtime_throughput.py [messages]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "eigenflux.settings")
os.environ.setdefault("LOG_LEVEL", "WARNING")

import django

django.setup()

from django.conf import settings  # noqa: E402

from eigenflux.base.redis import get_redis  # noqa: E402
from pipeline.runtime import Consumer  # noqa: E402
from pipeline.runtime.supervisor import Supervisor  # noqa: E402
from pipeline.streams import dlq_seen_key, dlq_stream  # noqa: E402
from tests.conftest import redis_url_with_db  # noqa: E402

STREAM = "bench:runtime"
TYPE = "io.eigenflux.bench.v1"
ROUNDS = 3


class NoopConsumer(Consumer):
    name = "bench-noop"
    stream = STREAM
    group = "cg:bench:runtime"
    event_types = frozenset({TYPE})
    batch_size = 100
    # Short, so the keeper's heartbeats (every lease/3) run several times during each few-second run and their
    # cost is in the figure, as in production where leases are renewed all the time.
    lease_seconds = 0.6

    def handle(self, event) -> None:
        pass


def fill(client, n: int) -> None:
    client.delete(STREAM)
    pipe = client.pipeline(transaction=False)
    for i in range(n):
        event_id = str(uuid.uuid4())
        pipe.xadd(
            STREAM,
            {
                "specversion": "1.0",
                "id": event_id,
                "source": "urn:bench",
                "type": TYPE,
                "subject": str(i % 1000),
                "time": "2026-01-01T00:00:00Z",
                "datacontenttype": "application/json",
                "data": json.dumps({"item_id": str(i), "author_id": "1"}),
                "correlationid": event_id,
                "causationid": "",
                "traceparent": "",
                "replay": "",
            },
        )
        if i % 1000 == 999:
            pipe.execute()
    pipe.execute()


def bare_loop(client, n: int, group: str) -> float:
    client.xgroup_create(STREAM, group, id="0")
    started = time.perf_counter()
    done = 0
    while done < n:
        response = client.xreadgroup(group, "bare", {STREAM: ">"}, count=100)
        entries = response[0][1] if response else []
        if not entries:
            break
        client.xack(STREAM, group, *[mid for mid, _ in entries])
        done += len(entries)
    elapsed = time.perf_counter() - started
    assert done == n, done
    return elapsed


def runtime(client, n: int, group: str, concurrency: int) -> float:
    NoopConsumer.group = group
    supervisor = Supervisor([NoopConsumer], concurrency=concurrency, burst=True)
    started = time.perf_counter()
    supervisor.run()
    elapsed = time.perf_counter() - started
    info = {g["name"]: g for g in client.xinfo_groups(STREAM)}[group]
    assert info["pending"] == 0 and info["last-delivered-id"] == client.xinfo_stream(STREAM)["last-generated-id"]
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("messages", type=int, nargs="?", default=50_000, help="messages per run (50000)")
    n = parser.parse_args().messages
    url = redis_url_with_db(settings.REDIS_URL, int(os.environ.get("BENCH_REDIS_DB", "11")))
    settings.REDIS_URL = url
    client = get_redis(url)
    try:
        import hiredis  # noqa: F401

        parser = "hiredis"
    except ImportError:
        parser = "python"
    fill(client, n)
    results: dict[str, list[float]] = {"bare": [], "runtime c=1": [], "runtime c=4": []}
    for r in range(ROUNDS):
        results["bare"].append(n / bare_loop(client, n, f"cg:bench:bare:{r}"))
        results["runtime c=1"].append(n / runtime(client, n, f"cg:bench:rt1:{r}", 1))
        results["runtime c=4"].append(n / runtime(client, n, f"cg:bench:rt4:{r}", 4))
    client.delete(STREAM, dlq_stream(STREAM), dlq_seen_key(STREAM))

    bare = statistics.median(results["bare"])
    print(f"\nStream runtime throughput: {n} messages, median of {ROUNDS} rounds, one process, parser {parser}")
    print(f"{'mode':<34}{'msgs/s':>12}{'vs bare':>10}")
    print("-" * 56)
    labels = {
        "bare": "bare redis-py (COUNT 100 + XACK)",
        "runtime c=1": "runtime, no-op handler, 1 thread",
        "runtime c=4": "runtime, no-op handler, 4 threads",
    }
    for key, values in results.items():
        rate = statistics.median(values)
        print(f"{labels[key]:<34}{rate:>12,.0f}{rate / bare:>9.0%}")
    best = max(statistics.median(v) for k, v in results.items() if k != "bare")
    verdict = "OK" if best >= 0.10 * bare else "BELOW TARGET"
    print(f"target: runtime >= 10 % of bare -> {best / bare:.0%} {verdict}")


if __name__ == "__main__":
    main()
