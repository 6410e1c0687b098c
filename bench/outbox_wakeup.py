"""How the outbox relays are woken (OUTBOX_WAKEUP), side by side: publish throughput, relay latency, idle cost.

Modes: `after-commit` (the default: NOTIFY after the commit, at most one per 5 ms per process), `after-commit-0`
(the same, OUTBOX_NOTIFY_COALESCE_MS=0: one NOTIFY per commit), `poll`, and `trigger`, the wake-up before migration
items.0015: a statement-level trigger NOTIFYing inside every publishing transaction, which this bench re-creates in
that mode's scratch database. `trigger` is no setting of the product: its processes run with OUTBOX_WAKEUP=trigger
through bench/floor/settings.py, which the publisher treats as "send nothing" and the relay as "LISTEN" (anything
but poll), with OUTBOX_NOTIFY_COALESCE_MS=0 (no re-drain after a notification, as before).

Every mode has a scratch database of its own (copies of one migrated template) and a Redis db of its own, with its
gunicorn (--workers sync workers) and its relay (`manage.py run_pipeline --relay-only`) running for the whole
publish part, so a mode's relay only ever sees that mode's rows.

1. Publish throughput: POST /api/v1/items/publish from --concurrency clients against each mode's server, and the
   floor view (the same three rows with the ORM, no NOTIFY), in an order that alternates each round; --rounds
   samples of --seconds, the median sample shown, and the median CPU per request of the mode's gunicorn workers,
   relay and PostgreSQL backends (less swayed than req/s by a neighbour's load on a shared machine). With each
   sample, the relay's pick-up delay under that load:
   dispatched_at (the relay's claiming transaction) - created_at (the insert), p50/p99 over the sample's rows.
2. Relay latency, one publish at a time: in this process, item_publish (the real publish service), then XREAD until
   its event is in stream:item:publish; --events per mode per round, a random pause of 0..--gap-ms before each, modes
   alternating, the relay a thread running OutboxRelay.run. Then --idle-probes publishes, each after 1.5 s of quiet
   (poll mode's worst case: its interval has backed off to PIPELINE_RELAY_POLL_SECONDS).
3. Idle cost: each mode's relay process with nothing to do for --idle-seconds: its looks at the outbox per second
   (scans of the outbox table, pg_stat_user_tables; each drain is one) and the CPU it uses.

    flock /tmp/eigenflux-bench.lock .venv/bin/python bench/outbox_wakeup.py [--modes trigger,after-commit,...]
        [--workers 3] [--concurrency 16] [--seconds 4] [--rounds 5] [--events 150] [--gap-ms 20] [--idle-probes 4]
"""

from __future__ import annotations

import argparse
import importlib
import os
import random
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.publish_throughput import create_agent, load, start_gunicorn  # noqa: E402
from bench.scratch import scratch_environment  # noqa: E402

# Each mode's settings; OUTBOX_WAKEUP=trigger reaches the product through bench/floor/settings.py only.
MODES: dict[str, dict[str, str]] = {
    "trigger": {"OUTBOX_WAKEUP": "after-commit", "BENCH_OUTBOX_WAKEUP": "trigger", "OUTBOX_NOTIFY_COALESCE_MS": "0"},
    "after-commit": {"OUTBOX_WAKEUP": "after-commit"},
    "after-commit-0": {"OUTBOX_WAKEUP": "after-commit", "OUTBOX_NOTIFY_COALESCE_MS": "0"},
    "poll": {"OUTBOX_WAKEUP": "poll"},
}
BASE_DB = "eigenflux_wakeup"
BASE_REDIS_DB = 12
# The old trigger ("before"), exactly as migration items.0015 drops and restores it.
_TRIGGER_MIGRATION = importlib.import_module("items.migrations.0015_outbox_notify_from_publisher")
TRIGGER_ON = _TRIGGER_MIGRATION.DROP + _TRIGGER_MIGRATION.RESTORE
TRIGGER_OFF = _TRIGGER_MIGRATION.DROP


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def db_url(base_url: str, name: str) -> str:
    return base_url.rsplit("/", 1)[0] + f"/{name}"


def mode_db(mode: str) -> str:
    return f"{BASE_DB}_{mode.replace('-', '_')}"


class ModeServers:
    """One mode's database, gunicorn and relay process."""

    def __init__(self, mode: str, index: int, env: dict[str, str], workers: int):
        self.mode = mode
        self.db = mode_db(mode)
        self.url = db_url(env["DATABASE_URL"], self.db)
        self.env = {
            **env,
            "DATABASE_URL": self.url,
            "REDIS_URL": env["REDIS_URL"].split("?")[0] + f"?db={BASE_REDIS_DB + 1 + index}",
            "DJANGO_SETTINGS_MODULE": "bench.floor.settings",
            "RATE_LIMIT_PUBLISH_PER_MINUTE": "1000000000",  # on, but never reached: its cost counts
            **MODES[mode],
        }
        self.server, self.port = start_gunicorn(self.env, workers)
        self.relay = subprocess.Popen(
            [sys.executable, "manage.py", "run_pipeline", "--relay-only", "--no-housekeeping", "--metrics-port", "0"],
            cwd=ROOT,
            env=self.env,
            stdout=subprocess.DEVNULL,  # its settings banner; warnings and errors still show
        )

    def stop(self) -> None:
        for proc in (self.relay, self.server):
            proc.terminate()
        for proc in (self.relay, self.server):
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()

    def cpu_seconds(self) -> float:
        return cpu_seconds(self.relay.pid)

    def cpu_by_process(self) -> dict[int, float]:
        """CPU seconds so far of everything serving this mode: gunicorn's workers, the relay, and the PostgreSQL
        backends connected to its database."""
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            backends = [
                pid
                for (pid,) in conn.execute(
                    "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
                ).fetchall()
            ]
        pids = [self.server.pid, self.relay.pid, *children(self.server.pid), *backends]
        return {pid: cpu_seconds(pid) for pid in pids}


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children(parent: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == parent:
                found.append(int(stat.parent.name))
        except (OSError, ValueError, IndexError):
            continue
    return found


def wait_for_relays(admin_url: str, dbs: list[str]) -> None:
    """Until every database has a pipeline connection (its relay has drained once), then a little more."""
    import psycopg

    deadline = time.monotonic() + 60
    with psycopg.connect(admin_url, autocommit=True) as conn:
        while time.monotonic() < deadline:
            rows = conn.execute(
                "SELECT DISTINCT datname FROM pg_stat_activity WHERE application_name LIKE 'eigenflux-pipeline%%'"
            ).fetchall()
            if set(dbs) <= {name for (name,) in rows}:
                time.sleep(1.0)
                return
            time.sleep(0.2)
    raise SystemExit("the relays did not connect within 60 s")


def pickup_delays(url: str, since: float, until: float) -> tuple[float, float, int]:
    """p50/p99 ms of dispatched_at - created_at for the publish events inserted in [since, until) (epoch s)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY d), percentile_cont(0.99) WITHIN GROUP (ORDER BY d), "
            "count(*) FROM (SELECT extract(epoch FROM dispatched_at - created_at) * 1000 AS d FROM items_outboxevent "
            "WHERE stream = 'stream:item:publish' AND created_at >= to_timestamp(%s) AND created_at < to_timestamp(%s) "
            "AND dispatched_at IS NOT NULL) AS t",
            [since, until],
        ).fetchone()
    return float(row[0] or "nan"), float(row[1] or "nan"), int(row[2])


def publish_part(servers: list[ModeServers], token: str, args) -> dict[str, list[dict]]:
    # The floor on a database without the trigger: it inserts outbox rows, and must not pay for a NOTIFY.
    quiet = next(s for s in servers if s.mode != "trigger")
    endpoints = [("floor", quiet, "/bench/floor")] + [(s.mode, s, "/api/v1/items/publish") for s in servers]
    for _, server, path in endpoints:  # warm-up: connections, caches
        load(server.port, path, token, 1.5, args.concurrency)
    samples: dict[str, list[dict]] = {name: [] for name, _, _ in endpoints}
    for r in range(args.rounds):
        for name, server, path in endpoints if r % 2 == 0 else list(reversed(endpoints)):
            cpu_before = server.cpu_by_process()
            since = time.time()
            row = load(server.port, path, token, args.seconds, args.concurrency)
            until = time.time()
            cpu_after = server.cpu_by_process()
            used = sum(cpu - cpu_before.get(pid, 0.0) for pid, cpu in cpu_after.items())
            row["cpu_ms"] = used * 1000 / max(1, row["requests"])
            if name != "floor":
                time.sleep(0.5)  # the relay finishes the sample's last rows
                row["pickup_p50"], row["pickup_p99"], row["pickup_n"] = pickup_delays(server.url, since, until)
            samples[name].append(row)
            print(
                f"  round {r + 1} {name:<15} {row['rps']:>7.0f} req/s {row['cpu_ms']:>6.2f} CPU ms/request", flush=True
            )
    return samples


def idle_part(servers: list[ModeServers], seconds: float) -> dict[str, tuple[float, float]]:
    """Each idle relay's looks at the outbox per second and its CPU share, all relays idle at once."""
    import psycopg

    def scans(server: ModeServers) -> int:
        with psycopg.connect(server.url, autocommit=True) as conn:
            row = conn.execute(
                "SELECT seq_scan + coalesce(idx_scan, 0) FROM pg_stat_user_tables WHERE relname = 'items_outboxevent'"
            ).fetchone()
        return row[0]

    time.sleep(3.0)  # poll mode's interval backs off to its ceiling; statistics of the last load are flushed
    before = {s.mode: (scans(s), s.cpu_seconds()) for s in servers}
    time.sleep(seconds)
    after = {s.mode: (scans(s), s.cpu_seconds()) for s in servers}
    rates = {}
    for s in servers:
        (scans_before, cpu_before), (scans_after, cpu_after) = before[s.mode], after[s.mode]
        rates[s.mode] = ((scans_after - scans_before) / seconds, (cpu_after - cpu_before) / seconds)
    return rates


def latency_part(modes: list[str], args) -> dict[str, dict[str, list[float]]]:
    """Commit -> entry in the stream, one publish at a time, through item_publish and a relay thread."""
    from django.db import connection
    from django.test import override_settings

    from eigenflux.base.redis import get_redis
    from items.events import STREAM_ITEM_PUBLISH
    from items.models import Agent
    from items.services.publish import item_publish
    from pipeline.relay import OutboxRelay

    client = get_redis()
    author = Agent.objects.get(name="bench-wakeup")
    rng = random.Random(15)
    results: dict[str, dict[str, list[float]]] = {m: {"paced": [], "after_idle": []} for m in modes}
    counter = 0

    def run_mode(mode: str, n: int, pause) -> list[float]:
        nonlocal counter
        with connection.cursor() as cursor:
            cursor.execute(TRIGGER_ON if mode == "trigger" else TRIGGER_OFF)
        latencies = []
        overrides = {
            name: float(value) if name.endswith("_MS") else value
            for name, value in MODES[mode].items()
            if name != "BENCH_OUTBOX_WAKEUP"
        }
        if mode == "trigger":
            overrides["OUTBOX_WAKEUP"] = "trigger"
        with override_settings(**overrides):
            client.delete(STREAM_ITEM_PUBLISH)
            relay = OutboxRelay(client=client)
            stop = threading.Event()
            thread = threading.Thread(target=relay.run, args=(stop,), daemon=True)
            thread.start()
            while relay.empty_rounds < 1:
                time.sleep(0.005)
            last = "0-0"
            try:
                for _ in range(n):
                    time.sleep(pause())
                    counter += 1
                    item_publish(author=author, content=f"wake-up bench broadcast {counter}: spare GPU hours")
                    committed = time.perf_counter()
                    response = client.xread({STREAM_ITEM_PUBLISH: last}, count=1, block=5000)
                    latencies.append((time.perf_counter() - committed) * 1000)
                    if not response:
                        raise SystemExit(f"{mode}: an event did not reach the stream within 5 s")
                    last = response[0][1][0][0]
            finally:
                stop.set()
                thread.join(5)
        return latencies

    for r in range(args.rounds):
        for mode in modes if r % 2 == 0 else list(reversed(modes)):
            results[mode]["paced"] += run_mode(mode, args.events, lambda: rng.uniform(0, args.gap_ms / 1000))
    if args.idle_probes:
        for mode in modes:
            results[mode]["after_idle"] = run_mode(mode, args.idle_probes, lambda: 1.5)
    with connection.cursor() as cursor:
        cursor.execute(TRIGGER_OFF)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--modes", default=",".join(MODES), help=f"some of {', '.join(MODES)}")
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=4.0, help="per publish sample")
    parser.add_argument("--rounds", type=int, default=5, help="alternating samples per mode")
    parser.add_argument("--events", type=int, default=150, help="sequential publishes per mode per round")
    parser.add_argument("--gap-ms", type=float, default=20.0, help="random pause before each, 0..this")
    parser.add_argument("--idle-probes", type=int, default=4, help="publishes after 1.5 s of quiet, per mode")
    parser.add_argument("--idle-seconds", type=float, default=10.0)
    args = parser.parse_args()
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if unknown := set(modes) - set(MODES):
        parser.error(f"unknown mode(s) {', '.join(sorted(unknown))}; valid: {', '.join(MODES)}")
    if modes == ["trigger"]:
        parser.error("add a mode other than trigger: the floor runs on its database")

    env = scratch_environment(BASE_DB, BASE_REDIS_DB)
    import psycopg

    # In a child process: the template database must have no session open when it is copied.
    token, env["BENCH_AGENT_ID"] = create_agent(env, "bench-wakeup")  # the floor view's author
    admin_url = db_url(env["DATABASE_URL"], "postgres")
    with psycopg.connect(admin_url, autocommit=True) as conn:
        for mode in modes:
            conn.execute(f"DROP DATABASE IF EXISTS {mode_db(mode)} WITH (FORCE)")
            conn.execute(f"CREATE DATABASE {mode_db(mode)} TEMPLATE {BASE_DB}")
    if "trigger" in modes:
        with psycopg.connect(db_url(env["DATABASE_URL"], mode_db("trigger")), autocommit=True) as conn:
            conn.execute(TRIGGER_ON)

    started = time.monotonic()
    servers: list[ModeServers] = []
    try:
        for index, mode in enumerate(modes):
            servers.append(ModeServers(mode, index, env, args.workers))
        wait_for_relays(admin_url, [s.db for s in servers])
        print("publish throughput ...", flush=True)
        samples = publish_part(servers, token, args)
        print("idle cost ...", flush=True)
        idle = idle_part(servers, args.idle_seconds)
    finally:
        for server in servers:
            server.stop()
    print("relay latency, one publish at a time ...", flush=True)
    latencies = latency_part(modes, args)
    with psycopg.connect(admin_url, autocommit=True) as conn:
        for mode in modes:
            conn.execute(f"DROP DATABASE IF EXISTS {mode_db(mode)} WITH (FORCE)")

    def median_row(rows: list[dict]) -> dict:
        return sorted(rows, key=lambda row: row["rps"])[len(rows) // 2]

    floor = median_row(samples["floor"])
    print(
        f"\nOutbox wake-up modes: gunicorn {args.workers} sync workers per mode, {args.concurrency} clients, "
        f"median of {args.rounds} alternating samples of {args.seconds:.0f} s; "
        f"{args.events} x {args.rounds} paced publishes (pause 0..{args.gap_ms:.0f} ms) per mode; "
        f"took {time.monotonic() - started:.0f} s\n"
    )
    print(
        "| mode | publish req/s (samples) | vs floor | CPU ms / request | publish p99 ms "
        "| pick-up under load p50 / p99 ms | relay p50 / p99 ms, one at a time | after 1.5 s idle, max ms "
        "| idle outbox looks/s | idle relay CPU |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for mode in ["floor", *modes]:
        row = median_row(samples[mode])
        all_rps = ", ".join(f"{sample['rps']:.0f}" for sample in samples[mode])
        cpu_ms = statistics.median(sample["cpu_ms"] for sample in samples[mode])
        cells = (
            f"| {row['rps']:.0f} ({all_rps}) | {row['rps'] / floor['rps']:.0%} | {cpu_ms:.2f} | {row['p99_ms']:.1f} "
        )
        if mode == "floor":
            print(f"| floor (no NOTIFY) {cells}| | | | | |")
            continue
        paced = latencies[mode]["paced"]
        after_idle = latencies[mode]["after_idle"]
        looks, cpu = idle[mode]
        print(
            f"| {mode} {cells}| {row['pickup_p50']:.2f} / {row['pickup_p99']:.2f} "
            f"| {statistics.median(paced):.2f} / {pct(paced, 0.99):.2f} "
            f"| {max(after_idle) if after_idle else float('nan'):.0f} | {looks:.1f} | {cpu:.2%} |"
        )


if __name__ == "__main__":
    main()
