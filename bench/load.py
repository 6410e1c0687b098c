"""Load benchmark: N keep-alive clients against the stack `make run` starts, with a realistic request mix.

    flock /tmp/eigenflux-bench.lock .venv/bin/python bench/load.py                   # 64 clients, 60 s, the mix
    flock /tmp/eigenflux-bench.lock .venv/bin/python bench/load.py --scenario me --clients 16 --duration 8

By default it starts the stack itself exactly as `make run` does (`python -m eigenflux.devstack`, on --port,
with the embedded servers under .data/), creates one agent per client, runs the load and stops the stack.
`--url` uses a stack that is already running instead (it must share this checkout's database, where the
bench creates its agents). `--server-env NAME=VALUE` (repeatable) sets variables for the started stack,
e.g. `DB_POOL=false` to measure the unpooled behaviour.

Mix (--scenario mix): publish 20 %, feed 30 %, item reads 30 %, keyword search 10 %, bad tokens 10 %. The
bad-token requests (malformed and made-up well-formed `ef_` tokens) come from another loopback address
(127.0.0.2), as an attacker's would, so the per-address limit they trigger is theirs alone.

Prints requests/s, p50/p99 per endpoint, every status count, and the peak number of PostgreSQL connections
per process kind sampled from pg_stat_activity every 100 ms, against the configured budget.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

WORDS = [
    "gpu",
    "rust",
    "reviewer",
    "dataset",
    "weekend",
    "offer",
    "need",
    "alert",
    "python",
    "kubernetes",
    "translation",
    "audit",
]
MIX = (("publish", 20), ("feed", 30), ("item", 30), ("search", 10), ("bad_token", 10))


def setup_django(server_env: dict[str, str]) -> None:
    # The bench's own connections are named apart, so they are not counted as the stack's.
    os.environ["DB_APPLICATION_NAME"] = "eigenflux-bench"
    for name in ("DB_POOL", "DB_CONN_MAX_AGE"):
        if name in server_env:
            os.environ[name] = server_env[name]
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "eigenflux.settings")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", interactive=False, verbosity=0)  # the stack would too; the agents come first


def make_tokens(count: int) -> list[str]:
    from items.services.agents import agent_create, agent_token_create

    run = secrets.token_hex(3)
    return [agent_token_create(agent=agent_create(name=f"bench-{run}-{n}")).token for n in range(count)]


class ConnectionPeaks(threading.Thread):
    """Samples pg_stat_activity every 100 ms: the peak per application_name and of their sum."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        import psycopg
        from django.db import connection

        params = connection.get_connection_params()
        params.pop("pool", None)
        params["application_name"] = "eigenflux-bench"
        self.conn = psycopg.connect(**params, autocommit=True)
        self.peaks: Counter[str] = Counter()
        self.total_peak = 0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            rows = self.conn.execute(
                "SELECT application_name, count(*) FROM pg_stat_activity "
                "WHERE backend_type = 'client backend' AND datname = current_database() "
                "AND application_name LIKE 'eigenflux-%%' "
                "AND application_name <> 'eigenflux-bench' GROUP BY 1"
            ).fetchall()
            total = 0
            for name, count in rows:
                self.peaks[name] = max(self.peaks[name], count)
                total += count
            self.total_peak = max(self.total_peak, total)
            self.stop.wait(0.1)


class Stats:
    def __init__(self) -> None:
        self.latencies: dict[str, list[float]] = defaultdict(list)
        self.statuses: dict[str, Counter] = defaultdict(Counter)

    def record(self, kind: str, status: int | str, seconds: float) -> None:
        self.latencies[kind].append(seconds)
        self.statuses[kind][status] += 1


async def client_loop(
    n: int, url: str, token: str, scenario: str, deadline: float, stats: Stats, shared_ids: list[str]
) -> None:
    rng = random.Random(n)
    kinds = [kind for kind, weight in MIX for _ in range(weight)]
    headers = {"Authorization": f"Bearer {token}"}
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    attacker = httpx.AsyncHTTPTransport(local_address="127.0.0.2", limits=limits)
    async with (
        httpx.AsyncClient(base_url=url, headers=headers, limits=limits, timeout=30) as http,
        httpx.AsyncClient(base_url=url, transport=attacker, timeout=30) as bad,
    ):
        own_ids: list[str] = []
        seq = 0
        while time.monotonic() < deadline:
            kind = "me" if scenario == "me" else rng.choice(kinds)
            started = time.perf_counter()
            try:
                if kind == "me":
                    response = await http.get("/api/v1/agents/me")
                elif kind == "publish":
                    seq += 1
                    words = " ".join(rng.sample(WORDS, 4))
                    content = f"Client {n} broadcast {seq}: {words}, details on request."
                    response = await http.post("/api/v1/items/publish", json={"content": content})
                    if response.status_code == 202:
                        own_ids.append(response.json()["item_id"])
                        if len(shared_ids) < 5000:
                            shared_ids.append(own_ids[-1])
                elif kind == "feed":
                    response = await http.get("/api/v1/feed", params={"limit": 20})
                elif kind == "item":
                    pool = own_ids if own_ids and rng.random() < 0.5 else shared_ids
                    item_id = rng.choice(pool) if pool else "1"
                    response = await http.get(f"/api/v1/items/{item_id}")
                elif kind == "search":
                    response = await http.get("/api/v1/search", params={"q": rng.choice(WORDS), "mode": "keyword"})
                else:
                    fake = "ef_" + secrets.token_urlsafe(32) if rng.random() < 0.5 else "not-a-token"
                    response = await bad.get("/api/v1/agents/me", headers={"Authorization": f"Bearer {fake}"})
                status: int | str = response.status_code
            except httpx.HTTPError as exc:
                status = type(exc).__name__
            stats.record(kind, status, time.perf_counter() - started)


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000 if ordered else 0.0


def start_stack(port: int, metrics_port: int, server_env: dict[str, str]) -> subprocess.Popen:
    env = os.environ | {"PORT": str(port), "PIPELINE_METRICS_PORT": str(metrics_port), **server_env}
    env.pop("DB_APPLICATION_NAME", None)
    log = open(REPO / ".data" / "bench-load-stack.log", "w")  # noqa: SIM115 - lives as long as the stack
    proc = subprocess.Popen(
        [sys.executable, "-m", "eigenflux.devstack"], cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200:
                time.sleep(2)  # the pipeline and job worker finish starting
                return proc
        except httpx.HTTPError:
            pass
        if proc.poll() is not None:
            break
        time.sleep(0.25)
    proc.kill()
    raise SystemExit(f"the stack did not start; see {log.name}")


def stop_stack(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", choices=("mix", "me"), default="mix")
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument("--url", help="use this running stack instead of starting one")
    parser.add_argument("--port", type=int, default=8099)
    parser.add_argument("--metrics-port", type=int, default=9199)
    parser.add_argument("--server-env", action="append", default=[], metavar="NAME=VALUE")
    args = parser.parse_args()
    server_env = dict(item.split("=", 1) for item in args.server_env)

    setup_django(server_env)
    from eigenflux.base.checks import connection_budget

    tokens = make_tokens(args.clients)
    proc = None if args.url else start_stack(args.port, args.metrics_port, server_env)
    url = args.url or f"http://127.0.0.1:{args.port}"
    sampler = ConnectionPeaks()
    sampler.start()
    stats = Stats()
    shared_ids: list[str] = []
    try:
        started = time.monotonic()
        deadline = started + args.duration

        async def run_all() -> None:
            await asyncio.gather(
                *(
                    client_loop(n, url, tokens[n], args.scenario, deadline, stats, shared_ids)
                    for n in range(args.clients)
                )
            )

        asyncio.run(run_all())
        elapsed = time.monotonic() - started
        time.sleep(0.3)
    finally:
        sampler.stop.set()
        sampler.join(2)
        if proc is not None:
            stop_stack(proc)

    total = sum(len(v) for v in stats.latencies.values())
    statuses: Counter = Counter()
    for counter in stats.statuses.values():
        statuses.update(counter)
    server_errors = sum(count for status, count in statuses.items() if not isinstance(status, int) or status >= 500)
    print(f"scenario {args.scenario}: {args.clients} keep-alive clients, {elapsed:.1f} s, server env {server_env}")
    print(f"{total} requests, {total / elapsed:.1f} req/s, 5xx or transport errors: {server_errors}")
    print("\n| endpoint | requests | p50 ms | p99 ms | statuses |\n|---|---|---|---|---|")
    for kind in sorted(stats.latencies):
        values = stats.latencies[kind]
        shown = ", ".join(f"{status}: {count}" for status, count in sorted(stats.statuses[kind].items(), key=str))
        print(f"| {kind} | {len(values)} | {quantile(values, 0.5):.1f} | {quantile(values, 0.99):.1f} | {shown} |")
    budget = connection_budget()
    print("\n| process kind | peak PostgreSQL connections |\n|---|---|")
    for name, peak in sorted(sampler.peaks.items()):
        print(f"| {name} | {peak} |")
    print(f"| all (sum at one instant) | {sampler.total_peak} |")
    print(f"budget without the reserve: {budget.total - budget.reserved} ({budget.explain()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
