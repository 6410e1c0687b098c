"""Publish throughput and latency under concurrent load on loopback, against the floor for this stack.

Starts gunicorn (sync workers, persistent DB connections) on a scratch database, drives
POST /api/v1/items/publish and the floor view (bench/floor/urls.py: the same three rows with the ORM,
nothing else) with the same load in the same run, and prints a table.

The two endpoints alternate (floor first in odd rounds, publish first in even ones) for --rounds rounds of
--seconds each, and the table shows the median round, so drift over the run (autovacuum, caches, a neighbour's
load) does not favour the endpoint that always ran first.

    .venv/bin/python bench/publish_throughput.py [--workers 3] [--concurrency 16] [--seconds 5] [--rounds 5]
        [--wakeup after-commit|poll] [--seeded 10k|100k|1M]

--seeded publishes into bench/seed.py's network of that scale (its tables and indexes as large as they are there)
instead of an empty scratch database; what the run wrote (its agent's items, their outbox events) is deleted at
the end.

--wakeup sets the server's OUTBOX_WAKEUP (how the outbox relays are woken; default: the environment's, else the
product default). No relay runs here, so nothing LISTENs; bench/outbox_wakeup.py compares the modes with relays.
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
BENCH_DB = "eigenflux_bench"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def prepare(seeded: str | None) -> tuple[dict[str, str], str]:
    """A migrated scratch database on the configured server (or the seeded network of that scale, as it is), an
    agent and its token."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "eigenflux.settings")
    import django

    django.setup()
    import psycopg
    from django.conf import settings

    from bench.seed import database_name

    base_url = settings.DATABASE_URL
    if not seeded:
        with psycopg.connect(base_url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {BENCH_DB} WITH (FORCE)")
            conn.execute(f"CREATE DATABASE {BENCH_DB}")
    bench_url = base_url.rsplit("/", 1)[0] + f"/{database_name(seeded) if seeded else BENCH_DB}"
    env = {
        **os.environ,
        "DATABASE_URL": bench_url,
        "REDIS_URL": settings.REDIS_URL.split("?")[0] + "?db=9",
        "SECRET_KEY": settings.SECRET_KEY,
        "RATE_LIMIT_PUBLISH_PER_MINUTE": "1000000000",  # on, but never reached: its cost counts
        "LOG_LEVEL": "WARNING",
        "DJANGO_SETTINGS_MODULE": "bench.floor.settings",
    }
    if not seeded:
        subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True)
    token, env["BENCH_AGENT_ID"] = create_agent(env, f"bench-publish-{os.getpid()}")  # the floor view's author
    return env, token


_CLEANUP = """
from items.models import Agent, OutboxEvent, RawItem
agent = Agent.objects.get(pk={agent})
subjects = [str(pk) for pk in RawItem.objects.filter(author=agent).values_list("pk", flat=True)]
for start in range(0, len(subjects), 5000):
    OutboxEvent.objects.filter(subject__in=subjects[start : start + 5000]).delete()
RawItem.objects.filter(author=agent).delete()
agent.delete()
print(len(subjects))
"""


def remove_published(env: dict[str, str]) -> int:
    """Delete what the run wrote into a seeded network: the bench agent's items, their outbox events, the agent."""
    out = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", _CLEANUP.format(agent=int(env["BENCH_AGENT_ID"]))],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return int(out.stdout.strip().splitlines()[-1])


def create_agent(env: dict[str, str], name: str) -> tuple[str, str]:
    """`manage.py create_agent` in a child process: the agent's token and its id."""
    out = subprocess.run(
        [sys.executable, "manage.py", "create_agent", name],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return out.stdout.strip(), out.stderr.split("#", 1)[1].split()[0]


def worker(port: int, path: str, token: str, seconds: float, threads: int, queue) -> None:
    latencies: list[float] = []
    errors = 0
    lock = threading.Lock()
    deadline = time.monotonic() + seconds

    def loop(n: int) -> None:
        nonlocal errors
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
        local, count = [], 0
        while time.monotonic() < deadline:
            body = json.dumps({"content": f"bench broadcast {os.getpid()}-{n}-{count}: spare GPU hours"})
            started = time.perf_counter()
            try:
                conn.request("POST", path, body=body, headers=headers)
                response = conn.getresponse()
                response.read()
                ok = response.status == 202
            except (OSError, http.client.HTTPException):
                ok = False
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            elapsed = time.perf_counter() - started
            count += 1
            if ok:
                local.append(elapsed)
            else:
                with lock:
                    errors += 1
        with lock:
            latencies.extend(local)

    pool = [threading.Thread(target=loop, args=(n,)) for n in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    queue.put((latencies, errors))


def load(port: int, path: str, token: str, seconds: float, concurrency: int) -> dict:
    processes = 2
    queue = multiprocessing.Queue()
    procs = [
        multiprocessing.Process(
            target=worker, args=(port, path, token, seconds, max(1, concurrency // processes), queue)
        )
        for _ in range(processes)
    ]
    for proc in procs:
        proc.start()
    results = [queue.get() for _ in procs]
    for proc in procs:
        proc.join()
    latencies = sorted(lat for lats, _ in results for lat in lats)
    errors = sum(err for _, err in results)
    quantiles = statistics.quantiles(latencies, n=100) if len(latencies) > 100 else [float("nan")] * 99
    return {
        "requests": len(latencies),
        "errors": errors,
        "rps": len(latencies) / seconds,
        "p50_ms": quantiles[49] * 1000,
        "p99_ms": quantiles[98] * 1000,
    }


def start_gunicorn(env: dict[str, str], workers: int) -> tuple[subprocess.Popen, int]:
    """gunicorn with `workers` sync workers on a free loopback port, once it accepts connections."""
    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "eigenflux.wsgi:application",
            "-w",
            str(workers),
            "-b",
            f"127.0.0.1:{port}",
            "--log-level",
            "warning",
            "--keep-alive",
            "30",
        ],
        cwd=ROOT,
        env=env,
    )
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return server, port
        except OSError:
            time.sleep(0.1)
    server.terminate()
    raise SystemExit(f"gunicorn did not listen on 127.0.0.1:{port} within 10 s")


def _median_row(runs: list[dict]) -> dict:
    """The sample with the median throughput (its latencies come with it, not medians of unrelated samples)."""
    ordered = sorted(runs, key=lambda row: row["rps"])
    return ordered[len(ordered) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=5.0, help="per sample")
    parser.add_argument("--rounds", type=int, default=5, help="samples per endpoint, alternating")
    parser.add_argument("--wakeup", choices=("after-commit", "poll"), help="OUTBOX_WAKEUP")
    parser.add_argument("--seeded", choices=("10k", "100k", "1M"), help="publish into bench/seed.py's network")
    args = parser.parse_args()

    env, token = prepare(args.seeded)
    if args.wakeup:
        env["OUTBOX_WAKEUP"] = args.wakeup
    server, port = start_gunicorn(env, args.workers)
    try:
        load(port, "/bench/floor", token, 2, args.concurrency)  # warm-up: connections, caches
        load(port, "/api/v1/items/publish", token, 2, args.concurrency)
        endpoints = {
            "floor: 3 ORM inserts, 1 transaction": "/bench/floor",
            "POST /api/v1/items/publish": "/api/v1/items/publish",
        }
        samples: dict[str, list[dict]] = {name: [] for name in endpoints}
        for r in range(args.rounds):
            order = list(endpoints) if r % 2 == 0 else list(reversed(endpoints))
            for name in order:
                samples[name].append(load(port, endpoints[name], token, args.seconds, args.concurrency))
        rows = [(name, _median_row(runs)) for name, runs in samples.items()]
    finally:
        server.terminate()
        server.wait(10)
        if args.seeded:
            print(f"removed the {remove_published(env):,} items this run published into the {args.seeded} network")
    network = f"into the seeded {args.seeded} network" if args.seeded else "into an empty database"
    print(
        f"\nPublish on loopback {network}: gunicorn {args.workers} sync workers, {args.concurrency} concurrent "
        f"clients, median of {args.rounds} alternating samples of {args.seconds:.0f} s each, same run\n"
    )
    print(f"| {'endpoint':<38} | {'req/s':>7} | {'p50 ms':>7} | {'p99 ms':>7} | {'errors':>6} |")
    print(f"|{'-' * 40}|{'-' * 9}|{'-' * 9}|{'-' * 9}|{'-' * 8}|")
    for name, row in rows:
        cells = f"{row['rps']:>7.0f} | {row['p50_ms']:>7.1f} | {row['p99_ms']:>7.1f} | {row['errors']:>6}"
        print(f"| {name:<38} | {cells} |")
    floor_rps = rows[0][1]["rps"]
    print(f"\npublish / floor = {rows[1][1]['rps'] / floor_rps:.0%}")


if __name__ == "__main__":
    main()
