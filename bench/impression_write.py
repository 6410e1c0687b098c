"""The impression log's cost on a feed request: one `impressions_record` call per page served (one outbox row in
its own transaction, the after-commit NOTIFY, and for a delivery of the unseen feed one Redis INCRBY for the
positions), timed for pages of 10, 20 and 100 items, with and without a delivery id. The consumer's side (the
page's rows stored by cg:replay:log, off the request path) is printed beside it for scale.

Uses a scratch database (created with migrations, dropped at the end) on the embedded (or DATABASE_URL)
PostgreSQL and Redis db 13 of the same server.
Run: flock /tmp/eigenflux-bench.lock .venv/bin/python bench/impression_write.py [--rounds 500]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import uuid
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.scratch import scratch_drop, scratch_environment

SCRATCH_DB = "bench_eigenflux_impressions"
PAGE_SIZES = (10, 20, 100)


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def timed(call) -> float:
    started = time.perf_counter()
    call()
    return (time.perf_counter() - started) * 1000


def measure(rounds: int) -> list[tuple[str, int, float, float]]:
    from items.models import OutboxEvent
    from items.services.impressions import impressions_record, impressions_store
    from tests.factories import make_agent, make_completed_item

    author, _ = make_agent("bench-author")
    items = [make_completed_item(author, f"Broadcast {n}: spare GPU hours.") for n in range(max(PAGE_SIZES))]
    reader, _ = make_agent("bench-reader")
    rows = []
    for size in PAGE_SIZES:
        page = items[:size]
        scores = [1.0 / (n + 1) for n in range(size)]
        for label, delivery in (("page write, for_me", ""), ("page write, unseen delivery", "imp_bench")):
            for _ in range(20):  # warm-up
                impressions_record(reader=reader, items=page, scores=scores, feed="for_me", delivery_id=delivery)
            samples = [
                timed(
                    lambda page=page, scores=scores, delivery=delivery: impressions_record(
                        reader=reader,
                        items=page,
                        scores=scores,
                        feed="unseen" if delivery else "for_me",
                        delivery_id=f"{delivery}_{uuid.uuid4().hex[:8]}" if delivery else "",
                    )
                )
                for _ in range(rounds)
            ]
            rows.append((label, size, *percentiles(samples)))
        envelopes = list(OutboxEvent.objects.order_by("-pk").values_list("event_id", "envelope")[:rounds])
        samples = [
            timed(lambda e=e, v=v: impressions_store(page_id=str(e), data=json.loads(v["data"]))) for e, v in envelopes
        ]
        rows.append(("rows stored (consumer)", size, *percentiles(samples)))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=500)
    args = parser.parse_args()
    if args.rounds < 10:
        parser.error("--rounds must be at least 10")
    scratch_environment(SCRATCH_DB, 13)
    from django.db import connection

    try:
        rows = measure(args.rounds)
    finally:
        connection.close()
        scratch_drop(SCRATCH_DB)
    print(f"impression log write, {args.rounds} pages per row, {datetime.now():%Y-%m-%d %H:%M}")
    print(f"| {'what':<28} | {'items/page':>10} | {'p50 ms':>7} | {'p99 ms':>7} |")
    print(f"|{'-' * 30}|{'-' * 11}:|{'-' * 8}:|{'-' * 8}:|")
    for label, size, p50, p99 in rows:
        print(f"| {label:<28} | {size:>10} | {p50:>7.2f} | {p99:>7.2f} |")


if __name__ == "__main__":
    main()
