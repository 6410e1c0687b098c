"""Enrichment throughput against the ideal: is `run_pipeline --consumer item-publish` bound by the model?

The fake OpenAI-compatible server (tests/fakes) answers every call after a fixed latency (--latency, default
0.2 s). An accepted item makes four sequential model calls (embedding, safety, extraction, suggestion), so with
C items in flight the ideal rate is C / (4 x latency) items per second. For each configuration the bench:
publishes N distinct items through the service layer with the pipeline stopped (N = max(--min-items,
--items-per-slot x C)), takes their `item.published` entries out of the outbox, starts the pipeline process(es)
with `--no-relay --no-housekeeping --concurrency C`, waits until each has joined the consumer group, then XADDs
all entries at once (with --stagger: the first C spread over one item's model time, so the slots run out of
phase) and times until every item is terminal.

Per run it measures: items/s, the ideal and the ratio; CPU seconds per item of the pipeline process(es) and of
their PostgreSQL backends (from /proc, backends found by application_name); transactions per item
(pg_stat_database.xact_commit delta, minus the bench's own polling queries, over the items); peak RSS, the
largest thread count seen, and the most database connections the pipeline held at once. Configurations
alternate round by round; the table shows the median of --rounds runs for each. Beside it, per run, where the
slot time went and the steady-state rate (bench/pipeline_timeline.py).

With --local the pipeline runs the offline analyzer instead (no model key, no fake server): the items are the
search corpus's broadcasts (at most one each), a warm-up of six of them is processed first so that loading and
training the analyzer's models is not counted, and the figure is CPU per item (ideal and ratio do not apply).
Run it on two checkouts to measure what a change adds per item on the offline path.

Scratch database `eigenflux_pipebench` (dropped and recreated), Redis db 6 (flushed).

    flock /tmp/eigenflux-bench.lock .venv/bin/python bench/pipeline_throughput.py [--latency 0.2] [--rounds 3]
    .venv/bin/python bench/pipeline_throughput.py --local --rounds 3 --concurrency 8
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.pipeline_floor import FloorResult, Plan, capture_with_settings, floor_items, run_floor  # noqa: E402
from bench.pipeline_local import local_batches, outcomes  # noqa: E402
from bench.pipeline_report import CALLS_PER_ITEM, print_table, print_timelines  # noqa: E402
from bench.pipeline_timeline import Timeline, add_entries, timeline  # noqa: E402
from bench.pyspy import spy_start, spy_stop  # noqa: E402
from bench.scratch import scratch_environment  # noqa: E402

DB = "eigenflux_pipebench"
REDIS_DB = 6
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Config:
    concurrency: int
    processes: int = 1
    latency: float = 0.2  # the fake model's seconds per call

    @property
    def label(self) -> str:
        label = f"{self.processes} x {self.concurrency}" if self.processes > 1 else str(self.concurrency)
        return f"{label} @{self.latency:g} s"

    @classmethod
    def parse(cls, spec: str, default_latency: float) -> Config:
        """`C`, `PxC` (P processes of C), either with `@L` (the model's latency, seconds; default --latency)."""
        counts, _, latency = spec.strip().partition("@")
        procs, _, conc = counts.rpartition("x")
        return cls(concurrency=int(conc), processes=int(procs or 1), latency=float(latency or default_latency))

    @property
    def in_flight(self) -> int:
        return self.concurrency * self.processes


@dataclass
class Result:
    items: int
    seconds: float
    ideal: float
    cpu_process: float
    cpu_postgres: float
    transactions: float
    rss_mb: float
    threads: int
    connections: int
    redis_commands: float = 0.0
    load: float = 0.0  # the 1-minute load average at the end of the run
    startup_cpu: float = 0.0  # CPU seconds the process(es) spent before the measured window (not counted)
    floor: FloorResult | None = None
    sdk_floor: FloorResult | None = None  # --sdk-floor: the floor with the requests sent through the openai package
    wall: tuple[float, float] = (0.0, 0.0)  # the measured window in wall-clock time (for the timeline)
    timeline: Timeline | None = None
    outcomes: dict[str, int] | None = None  # with --local: the items' terminal statuses

    @property
    def rate(self) -> float:
        return self.items / self.seconds

    @property
    def ratio(self) -> float:
        return self.rate / self.ideal


def setup() -> None:
    scratch_environment(DB, REDIS_DB)


def proc_cpu(pid: int) -> float:
    """User + system CPU seconds of a process (all its threads); 0 when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def proc_status(pid: int) -> dict[str, str]:
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return {}
    return dict(line.split(":", 1) for line in lines if ":" in line)


class Probe:
    """The bench's own database connection; counts its statements so they can be taken off xact_commit."""

    def __init__(self, url: str):
        import psycopg

        self.conn = psycopg.connect(url, autocommit=True)
        self.statements = 0

    def query(self, sql: str, params: list | None = None) -> list[tuple]:
        self.statements += 1
        return self.conn.execute(sql, params).fetchall()

    def xact_commit(self) -> int:
        self.query("SELECT pg_stat_clear_snapshot()")
        return self.query("SELECT xact_commit FROM pg_stat_database WHERE datname = %s", [DB])[0][0]

    def backends(self, application_name: str = "eigenflux-pipeline") -> list[int]:
        return [
            pid
            for (pid,) in self.query(
                "SELECT pid FROM pg_stat_activity WHERE datname = %s AND application_name = %s", [DB, application_name]
            )
        ]


def publish(n: int, agents: list, tag: str, texts: list[str] | None = None) -> tuple[list[int], list[dict]]:
    """N distinct items (the first N of `texts` when given), and their item.published envelopes taken out of the
    outbox (marked dispatched)."""
    from django.db import connection
    from django.utils import timezone

    from items.events import STREAM_ITEM_PUBLISH
    from items.models import OutboxEvent
    from items.services.publish import item_publish

    ids = []
    for i in range(n):
        raw = item_publish(
            author=agents[i % len(agents)],
            content=texts[i]
            if texts
            else f"Bench {tag} item {i}: offering {i % 97} spare GPU hours in slot {i}, zone {tag}-{i * 7919}.",
        ).item
        ids.append(raw.pk)
    rows = OutboxEvent.objects.filter(dispatched_at__isnull=True, stream=STREAM_ITEM_PUBLISH).order_by("id")
    envelopes = [row.envelope for row in rows]
    rows.update(dispatched_at=timezone.now())
    connection.close()
    return ids, envelopes


def run_config(config: Config, args, agents: list, tag: str, probe: Probe, env: dict, server) -> Result:
    from eigenflux.base.redis import get_redis

    client = get_redis()
    warmup: tuple[list[int], list[dict]] = ([], [])
    wanted = max(args.min_items, args.items_per_slot * config.in_flight)
    if args.local:
        warmup, (ids, envelopes) = local_batches(
            probe.conn, client, lambda texts: publish(len(texts), agents, tag, texts), wanted
        )
        n = len(ids)
    else:
        n = wanted
        ids, envelopes = publish(n, agents, tag)
    assert len(envelopes) == n, (len(envelopes), n)
    procs = []
    for k in range(config.processes):
        log = open(f"/tmp/eigenflux-pipebench-{k}.log", "w")  # noqa: SIM115 - closed with the process
        command = [sys.executable, "manage.py", "run_pipeline", "--consumer", "item-publish"]
        command += ["--no-relay", "--no-housekeeping", "--concurrency", str(config.concurrency)]
        procs.append((subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT), log))
    first_request = len(server.requests) if server else 0
    try:
        result = measure(config, args, probe, client, procs, (ids, envelopes), warmup)
        if server is None:
            result.outcomes = outcomes(probe.conn, ids)
            return result
        start, end = result.wall
        requests = server.requests[first_request:]
        slots = config.in_flight
        result.timeline = timeline(
            requests=requests, tag=tag, ids=ids, latency=config.latency, slots=slots, start=start, end=end
        )
        return result
    finally:
        for proc, _ in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc, log in procs:
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            log.close()


def wait_terminal(probe: Probe, pids: list[int], ids: list[int], n: int, deadline: float, timeout: float):
    """Poll until the N items are terminal; returns the most threads and database connections seen."""
    threads = connections = 0
    terminal_sql = (
        "SELECT count(*) FROM items_processeditem WHERE raw_id = ANY(%s) "
        "AND status IN ('completed', 'discarded', 'failed', 'review')"
    )
    while True:
        done = probe.query(terminal_sql, [ids])[0][0]
        threads = max(threads, sum(int(proc_status(pid).get("Threads", "0")) for pid in pids))
        connections = max(connections, len(probe.backends()))
        if done >= n:
            break
        if time.monotonic() > deadline:
            raise SystemExit(f"{done}/{n} items terminal after {timeout} s")
        time.sleep(0.1)
    return threads, connections


def measure(config: Config, args, probe: Probe, client, procs, batch, warmup) -> Result:
    """One run: `batch` (ids, envelopes) added at once and timed until terminal, after `warmup` (the same,
    possibly empty) has been processed outside the measured window."""
    from pipeline.runtime.liveness import live_names

    ids, envelopes = batch
    n = len(ids)
    pids = [p.pid for p, _ in procs]
    deadline = time.monotonic() + 120
    # Each process reports its consumer in the liveness registry once its threads run.
    while not all(any(f"-{pid}-" in name for name in live_names(client)) for pid in pids):
        if time.monotonic() > deadline or any(p.poll() is not None for p, _ in procs):
            raise SystemExit("the pipeline did not start; see /tmp/eigenflux-pipebench-*.log")
        time.sleep(0.1)
    time.sleep(1.0)  # every worker thread is up and waiting
    if warmup[0]:
        add_entries(client, warmup[1], config.in_flight, 0.0)
        wait_terminal(probe, pids, warmup[0], len(warmup[0]), time.monotonic() + args.timeout, args.timeout)
    startup_cpu = sum(proc_cpu(pid) for pid in pids)
    spies = spy_start(args, pids, config)
    cpu_start = sum(proc_cpu(pid) for pid in pids)
    backends_start = {pid: proc_cpu(pid) for pid in probe.backends()}
    statements_start = probe.statements
    xact_start = probe.xact_commit()

    redis_start = redis_calls(client)
    started, started_wall = time.monotonic(), time.time()
    add_entries(client, envelopes, config.in_flight, CALLS_PER_ITEM * config.latency if args.stagger else 0.0)
    threads, connections = wait_terminal(probe, pids, ids, n, started + args.timeout, args.timeout)
    elapsed, ended_wall = time.monotonic() - started, time.time()
    redis_commands = redis_calls(client) - redis_start - n - 1  # not the XADDs, nor this INFO
    cpu_process = sum(proc_cpu(pid) for pid in pids) - cpu_start
    cpu_postgres = sum(proc_cpu(pid) - backends_start.get(pid, 0.0) for pid in probe.backends())
    rss = sum(int(proc_status(pid).get("VmHWM", "0 kB").split()[0]) for pid in pids) / 1024
    spy_stop(spies)
    for proc, _ in procs:
        proc.send_signal(signal.SIGTERM)
    for proc, _ in procs:
        proc.wait(60)
    time.sleep(0.6)  # exited backends have flushed their statistics
    own = probe.statements - statements_start + 1  # the read below is one more of ours
    transactions = probe.xact_commit() - xact_start - own
    return Result(
        items=n,
        seconds=elapsed,
        ideal=config.in_flight / (CALLS_PER_ITEM * config.latency),
        cpu_process=cpu_process / n,
        cpu_postgres=cpu_postgres / n,
        transactions=transactions / n,
        rss_mb=rss,
        threads=threads,
        connections=connections,
        redis_commands=redis_commands / n,
        load=os.getloadavg()[0],
        startup_cpu=startup_cpu,
        wall=(started_wall, ended_wall),
    )


def redis_calls(client) -> int:
    """Commands Redis has run so far (all clients; the bench sends none while a run is measured)."""
    return sum(int(stats["calls"]) for stats in client.info("commandstats").values())


def floor_run(
    plan: Plan, config: Config, n: int, agents: list, tag: str, server, probe: Probe, *, sdk: bool = False
) -> FloorResult:
    """The floor (bench/pipeline_floor.py) at the same number in flight, on as many items (one process); `sdk`:
    its requests sent through the openai package."""
    items, envelopes = floor_items(n, agents, f"{tag}-sdk" if sdk else tag)
    return run_floor(plan, items, envelopes, concurrency=config.in_flight, base_url=server.url, probe=probe, sdk=sdk)


def model_environment(local: bool):
    """The fake model server (None with --local) and the pipeline processes' environment."""
    from tests.fakes.fixtures import FakeLLM
    from tests.fakes.openai_server import FakeOpenAIServer

    if local:
        env = {key: value for key, value in os.environ.items() if not key.startswith(("LLM_", "SAFETY_LLM_"))}
        return None, {**env, "LLM_PROVIDER": "local"}
    server = FakeOpenAIServer(safety_model="fake-safety").start()
    return server, {**os.environ, **FakeLLM(server).env(), "LLM_TIMEOUT": "30"}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency", type=float, default=0.2, help="fake model latency per call (s)")
    parser.add_argument("--rounds", type=int, default=3, help="runs per configuration (median reported)")
    parser.add_argument("--min-items", type=int, default=300, help="at least this many items per run")
    parser.add_argument("--items-per-slot", type=int, default=4, help="items per in-flight slot per run")
    parser.add_argument("--concurrency", default="32,64,256,2x128", help="comma list; PxC = P processes of C")
    parser.add_argument("--timeout", type=float, default=600.0, help="give up a run after this many seconds")
    parser.add_argument("--no-floor", action="store_true", help="skip the floor (bench/pipeline_floor.py)")
    parser.add_argument(
        "--sdk-floor", action="store_true", help="also the floor with its requests sent through the openai package"
    )
    parser.add_argument("--stagger", action="store_true", help="start the slots out of phase (add_entries)")
    parser.add_argument("--py-spy", default="", help="path to a py-spy binary: profile the measured window")
    parser.add_argument("--local", action="store_true", help="the offline analyzer, no fake model (CPU per item)")
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    if args.local:
        args.no_floor = True
    configs = [Config.parse(spec, args.latency) for spec in args.concurrency.split(",")]
    setup()

    from django.conf import settings

    from eigenflux.base.redis import get_redis
    from items.services.agents import agent_create
    from tests.fakes.fixtures import FakeLLM

    get_redis().flushdb()
    server, env = model_environment(args.local)
    plan = None if args.no_floor else capture_with_settings(server, FakeLLM(server))
    env["LOG_LEVEL"] = os.environ.get("BENCH_PIPELINE_LOG_LEVEL", "WARNING")
    agents = [agent_create(name=f"pipebench-{i}") for i in range(20)]
    probe = Probe(os.environ["DATABASE_URL"])
    results: dict[Config, list[Result]] = {config: [] for config in configs}
    try:
        for r in range(args.rounds):
            for config in configs:
                if server is not None:
                    server.latency = config.latency
                tag = f"r{r}c{config.label}".replace(" ", "")
                result = run_config(config, args, agents, tag, probe, env, server)
                if plan is not None:
                    result.floor = floor_run(plan, config, result.items, agents, tag, server, probe)
                    if args.sdk_floor:
                        result.sdk_floor = floor_run(plan, config, result.items, agents, tag, server, probe, sdk=True)
                results[config].append(result)
                ratio = "" if args.local else f" = {result.ratio:.2f} of ideal"
                outcomes = f"; outcomes {result.outcomes}" if result.outcomes else ""
                print(
                    f"round {r + 1} C={config.label}: {result.items} items in {result.seconds:.1f} s, "
                    f"{result.rate:.1f}/s{ratio}; start-up {result.startup_cpu:.1f} CPU s (not counted){outcomes}",
                    flush=True,
                )
    finally:
        if server is not None:
            server.stop()
        get_redis().flushdb()

    print_table(results, plan, args, settings.PIPELINE_DB_POOL_MAX_SIZE)
    if not args.local:
        print_timelines(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
