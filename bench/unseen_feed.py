"""The unseen feed's cost: one `refresh` (seen-memory anti-join, ranking, delivery rows + outbox event, Redis
delivery cache) and one `load_more`, as the network and the reader's seen memory grow; the plain cached native
feed page is printed beside it for scale.

Uses a scratch database (created with migrations, dropped at the end) on the embedded (or DATABASE_URL)
PostgreSQL and a dedicated Redis db (BENCH_REDIS_DB, default 12), which it flushes.
Run: flock /tmp/eigenflux-bench.lock .venv/bin/python bench/unseen_feed.py [items ...]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "eigenflux.settings")
os.environ.setdefault("LOG_LEVEL", "WARNING")

import django

django.setup()

from django.conf import settings  # noqa: E402
from django.db import connection  # noqa: E402
from django.utils import timezone  # noqa: E402

from eigenflux.base.redis import get_redis  # noqa: E402
from items import selectors  # noqa: E402
from items.models import Agent, FeedDelivery, ItemStatus, ProcessedItem, RawItem  # noqa: E402
from items.services.agents import agent_create  # noqa: E402
from items.services.unseen_feed import feed_load_more, feed_refresh  # noqa: E402
from tests.conftest import redis_url_with_db  # noqa: E402

SCRATCH_DB = "bench_eigenflux_unseen"
ROUNDS = 30
LIMIT = 20


def populate(n_items: int, authors: list[Agent]) -> None:
    now = timezone.now()
    raws = RawItem.objects.bulk_create(
        RawItem(author=authors[i % len(authors)], content=f"broadcast {i} about gpu hours", content_hash=f"{i:064x}")
        for i in range(n_items)
    )
    ProcessedItem.objects.bulk_create(
        ProcessedItem(
            raw=raw,
            author_id=raw.author_id,
            status=ItemStatus.COMPLETED,
            broadcast_type="info",
            summary=raw.content,
            keywords=["gpu", f"k{i % 50}"],
            domains=["compute"],
            group_id=raw.pk if i % 10 else max(1, raw.pk - 1),  # one in ten joins its neighbour's group
            processed_at=now - timedelta(seconds=n_items - i),
        )
        for i, raw in enumerate(raws)
    )


def timed(call) -> float:
    started = time.perf_counter()
    call()
    return (time.perf_counter() - started) * 1000


def measure(n_items: int) -> dict[str, float]:
    authors = [agent_create(name=f"author-{n_items}-{i}") for i in range(20)]
    populate(n_items, authors)
    # The reader has already been served half of the network (its seen memory).
    reader = agent_create(name=f"reader-{n_items}")
    reader.profile_keywords = ["gpu", "k7"]
    reader.save(update_fields=["profile_keywords"])
    seen = list(ProcessedItem.objects.order_by("pk").values_list("pk", "group_id")[: n_items // 2])
    FeedDelivery.objects.bulk_create(
        FeedDelivery(agent=reader, item_id=pk, group_id=group, impression_id="imp_old", delivered_at=timezone.now())
        for pk, group in seen
    )
    connection.cursor().execute("ANALYZE")
    refresh, load_more, native = [], [], []
    for _ in range(ROUNDS):
        # Forget the previous round's deliveries, so every refresh has the same work to do.
        FeedDelivery.objects.filter(agent=reader).exclude(impression_id="imp_old").delete()
        refresh.append(timed(lambda: feed_refresh(reader=reader, limit=LIMIT)))
        load_more.append(timed(lambda: feed_load_more(reader=reader, limit=LIMIT)))
        native.append(
            timed(lambda: selectors.feed_items(broadcast_type=None, domain=None, below_id=None, limit=LIMIT + 1))
        )
    ProcessedItem.objects.all().delete()
    RawItem.objects.all().delete()
    Agent.objects.all().delete()
    return {
        "refresh p50": statistics.median(refresh),
        "refresh p90": sorted(refresh)[int(0.9 * ROUNDS)],
        "load_more p50": statistics.median(load_more),
        "plain feed query p50": statistics.median(native),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("items", type=int, nargs="*", help="network sizes in items (1000 10000 50000)")
    sizes = parser.parse_args().items or [1000, 10000, 50000]
    url = redis_url_with_db(settings.REDIS_URL, int(os.environ.get("BENCH_REDIS_DB", "12")))
    settings.REDIS_URL = url
    get_redis(url).flushdb()
    connection.settings_dict["TEST"]["NAME"] = SCRATCH_DB
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=False, serialize=False)
    try:
        rows = [(n, measure(n)) for n in sizes]
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)
        get_redis(url).flushdb()
    print(f"\nUnseen feed, limit {LIMIT}, reader already served half of the items, {ROUNDS} rounds (ms)")
    columns = list(rows[0][1])
    print(f"{'items':>8}" + "".join(f"{c:>22}" for c in columns))
    for n, figures in rows:
        print(f"{n:>8}" + "".join(f"{figures[c]:>22.2f}" for c in columns))


if __name__ == "__main__":
    main()
