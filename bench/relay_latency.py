"""Outbox relay latency (commit -> entry in the stream, p50/p99), woken as OUTBOX_WAKEUP says, and what a NOTIFY
costs PostgreSQL's commit throughput when sent inside the publishing transaction vs after COMMIT, at raw SQL level.
bench/outbox_wakeup.py compares the wake-up modes through the real publish path and gunicorn.

Uses a scratch database (created with migrations, dropped at the end) on the embedded (or DATABASE_URL)
PostgreSQL and a dedicated Redis db (BENCH_REDIS_DB, default 11), deleting only its own keys.
Run: .venv/bin/python bench/relay_latency.py [events] [seconds-per-mode]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "eigenflux.settings")
os.environ.setdefault("LOG_LEVEL", "WARNING")

import django

django.setup()

import psycopg  # noqa: E402
from django.conf import settings  # noqa: E402
from django.db import connection, transaction  # noqa: E402

from eigenflux.base.redis import get_redis  # noqa: E402
from items.outbox import NOTIFY_CHANNEL, outbox_event_create  # noqa: E402
from pipeline.relay import OutboxRelay  # noqa: E402
from tests.conftest import redis_url_with_db  # noqa: E402

STREAM = "bench:relay"
SCRATCH_DB = "bench_eigenflux_relay"
WRITERS = 4
# "coalesced": a writer skips the after-commit NOTIFY when it sent one less than this long ago (for comparison
# only: it needs the relay to re-drain once that long after a wake-up, so skipped commits are still seen).
COALESCE_S = 0.005


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def relay_latency(client, n: int) -> list[float]:
    """Sequential publishes through outbox_event_create (woken as OUTBOX_WAKEUP says); time until XREAD sees each."""
    relay = OutboxRelay()
    stop = threading.Event()
    thread = threading.Thread(target=relay.run, args=(stop,), daemon=True)
    thread.start()
    while relay.empty_rounds < 1:
        time.sleep(0.01)
    # The last id seen, never "$": an entry the relay adds before XREAD starts would be skipped by "$" (the read
    # would wait for the next one). The stream was deleted before the run, so everything in it is ours.
    last = "0-0"
    latencies = []
    try:
        for i in range(n):
            with transaction.atomic():
                outbox_event_create(stream=STREAM, event_type="io.eigenflux.bench.v1", subject="b", data={"i": i})
            committed = time.perf_counter()
            response = client.xread({STREAM: last}, count=1, block=5000)
            latencies.append(time.perf_counter() - committed)
            if not response:
                raise SystemExit(f"event {i} did not reach the stream within 5 s")
            last = response[0][1][0][0]
    finally:
        stop.set()
        thread.join(5)
    return latencies


def commit_throughput(conninfo: dict, mode: str, seconds: float) -> float:
    """WRITERS connections, each committing 3-row transactions as fast as it can for `seconds`."""
    counts = [0] * WRITERS
    stop = threading.Event()

    def writer(k: int) -> None:
        last_notify = 0.0
        with psycopg.connect(**conninfo) as conn:
            while not stop.is_set():
                with conn.transaction():
                    conn.execute("INSERT INTO bench_tx (payload) VALUES ('a'), ('b'), ('c')")
                    if mode == "inside":
                        conn.execute("SELECT pg_notify(%s, '')", [NOTIFY_CHANNEL])
                if mode == "after" or (mode == "coalesced" and time.monotonic() - last_notify >= COALESCE_S):
                    conn.execute("SELECT pg_notify(%s, '')", [NOTIFY_CHANNEL])
                    last_notify = time.monotonic()
                counts[k] += 1

    # A listener draining notifications, as the relays do.
    def listener() -> None:
        with psycopg.connect(**{**conninfo, "autocommit": True}) as conn:
            conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
            while not stop.is_set():
                for _ in conn.notifies(timeout=0.2):
                    pass

    threads = [threading.Thread(target=listener)] + [threading.Thread(target=writer, args=(k,)) for k in range(WRITERS)]
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join()
    return sum(counts) / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("events", type=int, nargs="?", default=500, help="events per mode (500)")
    parser.add_argument("seconds", type=float, nargs="?", default=3.0, help="seconds per mode (3)")
    args = parser.parse_args()
    n, seconds = args.events, args.seconds
    url = redis_url_with_db(settings.REDIS_URL, int(os.environ.get("BENCH_REDIS_DB", "11")))
    settings.REDIS_URL = url
    client = get_redis(url)
    client.delete(STREAM)
    connection.settings_dict["TEST"]["NAME"] = SCRATCH_DB
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=False, serialize=False)
    try:
        latencies = relay_latency(client, n)
        params = connection.settings_dict
        conninfo = {
            "dbname": params["NAME"],
            "user": params.get("USER") or None,
            "password": params.get("PASSWORD") or None,
            "host": params.get("HOST") or None,
            "port": params.get("PORT") or None,
            "autocommit": True,
        }
        with psycopg.connect(**conninfo) as conn:
            conn.execute("CREATE TABLE IF NOT EXISTS bench_tx (id bigserial PRIMARY KEY, payload text)")
        # Alternate the modes twice so drift (autovacuum, cache) does not favour one.
        tput: dict[str, list[float]] = {"none": [], "after": [], "coalesced": [], "inside": []}
        for _ in range(2):
            for mode in tput:
                tput[mode].append(commit_throughput(conninfo, mode, seconds))
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)
        client.delete(STREAM)
        for key in client.scan_iter("eigenflux:outbox:sent:*"):
            client.delete(key)

    ms = [x * 1000 for x in latencies]
    p50 = statistics.median(ms)
    wakeup = settings.OUTBOX_WAKEUP
    print(f"\nOutbox relay: commit -> entry in the stream, {n} sequential publishes, OUTBOX_WAKEUP={wakeup}")
    print(f"{'p50 ms':>10}{'p90 ms':>10}{'p99 ms':>10}{'max ms':>10}")
    print(f"{p50:>10.2f}{pct(ms, 0.90):>10.2f}{pct(ms, 0.99):>10.2f}{max(ms):>10.2f}")
    print(f"target: p50 <= 10 ms -> {'OK' if p50 <= 10 else 'ABOVE TARGET'}")
    base = statistics.mean(tput["none"])
    print(f"\nCommit throughput, {WRITERS} writers x 3-row transactions, one LISTENer, {seconds:.0f} s x 2 per mode")
    print(f"{'NOTIFY':<28}{'tx/s':>10}{'vs none':>10}")
    print("-" * 48)
    labels = {
        "none": "none",
        "after": "after COMMIT (own statement)",
        "coalesced": "after COMMIT, <= 1 per 5 ms",
        "inside": "inside the transaction",
    }
    for mode, values in tput.items():
        rate = statistics.mean(values)
        print(f"{labels[mode]:<28}{rate:>10,.0f}{rate / base - 1:>+10.1%}")


if __name__ == "__main__":
    main()
