"""Match push's cost per completed item (docs/feed.md#match-push): `item_match_push` — the HNSW query over reader
profiles, the presence lookup, the ranking's score for each online candidate, the Redis claims and the sends —
timed over new items, with 10k reader profiles in 50 topic clusters and 10% or all of them online.

Uses a scratch database (created with migrations, dropped at the end) on the embedded (or DATABASE_URL)
PostgreSQL and Redis db 12 of the same server.
Run: flock /tmp/eigenflux-bench.lock .venv/bin/python bench/match_push.py [--readers 10000] [--items 30]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.scratch import scratch_drop, scratch_environment

SCRATCH_DB = "bench_eigenflux_match_push"
CLUSTERS = 50
NOISE = 0.4  # spread of a reader or an item around its topic


def near(rng, centre):
    import numpy as np

    vector = centre + NOISE * rng.standard_normal(centre.shape) / np.sqrt(centre.size)
    return (vector / np.linalg.norm(vector)).tolist()


def populate(readers: int, rng) -> tuple[list, list[int]]:
    import numpy as np
    from django.conf import settings
    from django.utils import timezone

    from eigenflux.base.embedding_space import configured_embedding_model
    from items.models import Agent, ReaderProfile

    centres = rng.standard_normal((CLUSTERS, settings.EMBEDDING_DIMENSIONS))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    agents = Agent.objects.bulk_create(
        Agent(name=f"reader {n}", name_key=f"reader {n}", name_shape_key=f"reader {n}", seeks="x", offers="y")
        for n in range(readers)
    )
    now = timezone.now()
    ReaderProfile.objects.bulk_create(
        (
            ReaderProfile(
                agent=agent,
                seeks_embedding=near(rng, centres[n % CLUSTERS]),
                offers_embedding=near(rng, centres[(n + 1) % CLUSTERS]),
                embedding_model=configured_embedding_model(),
                version=now,
            )
            for n, agent in enumerate(agents)
        ),
        batch_size=1000,
    )
    return list(centres), [agent.pk for agent in agents]


def measure(readers: int, items: int) -> list[tuple[str, float, float, float, float]]:
    import numpy as np
    from django.conf import settings

    from items.presence import presence_heartbeat
    from items.services.match_push import item_match_push
    from tests.factories import make_agent, make_completed_item

    settings.MATCH_PUSH_PER_HOUR = 1_000_000  # measure the whole path, not the bucket's refusals
    rng = np.random.default_rng(7)
    centres, ids = populate(readers, rng)
    author, _ = make_agent("bench-author")
    rows = []
    online: set[int] = set()
    for fraction in (0.1, 1.0):
        for pk in ids[: int(len(ids) * fraction)]:
            if pk not in online:
                presence_heartbeat(agent_id=pk, channel=f"bench-{pk}")
                online.add(pk)
        samples, pushed = [], []
        for n in range(items):
            kind = ("supply", "info", "demand")[n % 3]
            created = make_completed_item(
                author,
                f"Bench item {fraction} {n}",
                embedding=near(rng, centres[n % CLUSTERS]),
                broadcast_type=kind,
                quality=0.8,
            )
            started = time.perf_counter()
            pushed.append(len(item_match_push(item_id=created.pk, event_id=f"bench-{n}", time="")))
            samples.append((time.perf_counter() - started) * 1000)
        ordered = sorted(samples)
        p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
        rows.append((f"{int(fraction * 100)}% online", statistics.median(ordered), p99, statistics.mean(pushed), 0.0))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--readers", type=int, default=10_000)
    parser.add_argument("--items", type=int, default=30)
    args = parser.parse_args()
    if args.readers < CLUSTERS or args.items < 3:
        parser.error(f"--readers must be at least {CLUSTERS} and --items at least 3")
    scratch_environment(SCRATCH_DB, 12)
    from django.db import connection

    try:
        rows = measure(args.readers, args.items)
    finally:
        connection.close()
        scratch_drop(SCRATCH_DB)
    print(
        f"match push per new item, {args.readers} readers, {args.items} items per row, {datetime.now():%Y-%m-%d %H:%M}"
    )
    print(f"| {'readers online':<15} | {'p50 ms':>7} | {'p99 ms':>7} | {'pushes/item':>11} |")
    print(f"|{'-' * 17}|{'-' * 8}:|{'-' * 8}:|{'-' * 12}:|")
    for label, p50, p99, pushes, _ in rows:
        print(f"| {label:<15} | {p50:>7.1f} | {p99:>7.1f} | {pushes:>11.1f} |")


if __name__ == "__main__":
    main()
