"""A reader simulator for the learned feed ranker (docs/feed-ranker.md#the-reader-simulator): synthetic readers
with hidden tastes use the real API for simulated days, the ranker retrains every night, and each day prints
clicks@10 and nDCG@10 against the hidden tastes, the formula against the learned ranker, for held-out readers
(whose actions are never trained on) and for readers with no history.

The world: --topics topic centroids in the embedding space; every day --items-per-day new completed items near
them (type, quality, author and topic drawn at random; written directly, not through the analyzer: the
embeddings are synthetic). Each reader states a profile (its seeks vector: near one topic) but its hidden taste
is unlike it: it also likes a second topic it never states, prefers one broadcast type (drawn with a population
skew: demands and supplies more often than info and alerts), and cares about quality. Its probability of
following an item up is sigmoid(6 (u - 0.9)) with u = cos(primary) + cos(secondary) (each at least 0)
+ 0.6 [liked type] + 0.8 (quality - 0.65).

A day: the readers with history (--readers trained on, --held-out held out) each GET
`/api/v1/feed?for_me=1&limit=10`, look at place k with probability 0.92^(k-1), follow up what they like (a
feed event `question` through the client API and a +1, or +2 when u > 1.3, through the native feedback API) and
give -1 to what they looked at and dislike (u < 0.3, one time in three). The outbox is then handed to the
impression-log and stats consumers in-process, the world ages by a day (every timestamp moves 24 hours back),
and `train_ranker`'s service retrains on the earlier days (the held-out readers left out), gated as always.

Measured each morning, before anyone acts: every held-out reader's and every no-history reader's first page
(limit 10, through the API) with the learned ranker and with FEED_RANKER_ENABLED off (the formula); clicks@10 is
the expected number of follow-ups on that page (the sum of the probabilities, every place looked at), nDCG@10
uses those probabilities as gains against the best ten of all servable items. Readers with no history are
measured with the formula and with the model ranking them too (FEED_RANKER_FOR_NEWCOMERS, off in serving by
default): the cold start's two choices.

Uses a scratch database (dropped at the end) and Redis db BENCH_REDIS_DB (default 13), flushed.

    flock /tmp/eigenflux-bench.lock .venv/bin/python bench/feed_sim.py [--days 7] [--seed 7]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--days", type=int, default=7, help="simulated days after the first (7)")
parser.add_argument("--readers", type=int, default=48, help="readers whose actions train the ranker (48)")
parser.add_argument("--held-out", type=int, default=24, help="readers measured, never trained on (24)")
parser.add_argument("--cold", type=int, default=24, help="readers with no history, measured only (24)")
parser.add_argument("--topics", type=int, default=16, help="topic centroids (16)")
parser.add_argument("--items-per-day", type=int, default=48, help="new items a day (48)")
parser.add_argument("--seed", type=int, default=7, help="the world's random seed (7)")
parser.add_argument("--weights", action="store_true", help="print each trained model's weights")
parser.add_argument("--l2", type=float, default=1.0, help="the nightly training's L2 (train_ranker's --l2, 1.0)")
ARGS = parser.parse_args()
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "eigenflux.settings")
os.environ.setdefault("LOG_LEVEL", "WARNING")

import django  # noqa: E402

django.setup()

import numpy as np  # noqa: E402
from django.conf import settings  # noqa: E402
from django.db import connection, transaction  # noqa: E402
from django.test import Client  # noqa: E402
from django.utils import timezone  # noqa: E402

from bench.scratch import scratch_test_db  # noqa: E402
from eigenflux.base.embedding_space import configured_embedding_model  # noqa: E402
from items.events import STREAM_ITEM_STATS, STREAM_REPLAY_LOG  # noqa: E402
from items.feed_ranking import rank_entries  # noqa: E402
from items.feed_ranking.pages import exploration_seed  # noqa: E402
from items.models import OutboxEvent, ProcessedItem, RankerModel, ReaderProfile  # noqa: E402
from items.ranker.training import TrainingRefused, ranker_train  # noqa: E402
from pipeline.consumers.item_stats import ItemStatsConsumer  # noqa: E402
from pipeline.consumers.replay_log import ReplayLogConsumer  # noqa: E402
from tests.factories import make_agent, make_completed_item, outbox_stream_event  # noqa: E402

TYPES = ("supply", "demand", "info", "alert")
TYPE_SKEW = (0.3, 0.4, 0.2, 0.1)  # how often readers prefer each type (hidden)
AGED_TABLES = ("items_rawitem", "items_processeditem", "items_feedimpression", "items_itemfeedback")
AGED_TABLES += ("items_feedevent", "items_itemstats", "items_feeddelivery", "items_outboxevent")


class World:
    def __init__(self, seed: int, topics: int) -> None:
        self.rng = np.random.default_rng(seed)
        dims = settings.EMBEDDING_DIMENSIONS
        centroids = self.rng.standard_normal((topics, dims))
        self.centroids = centroids / np.linalg.norm(centroids, axis=1, keepdims=True)
        self.items: dict[int, tuple[np.ndarray, str, float]] = {}  # id -> (unit embedding, type, quality)
        self.authors = [make_agent()[0] for _ in range(12)]

    def near(self, topic: int, spread: float) -> np.ndarray:
        noise = self.rng.standard_normal(self.centroids.shape[1]) / math.sqrt(self.centroids.shape[1])
        vector = self.centroids[topic] + spread * noise
        return vector / np.linalg.norm(vector)

    def publish(self, count: int) -> None:
        for _ in range(count):
            topic = int(self.rng.integers(len(self.centroids)))
            kind, quality = TYPES[int(self.rng.integers(4))], float(self.rng.uniform(0.45, 0.95))
            vector = self.near(topic, 0.8)
            author = self.authors[int(self.rng.integers(len(self.authors)))]
            created = make_completed_item(
                author,
                f"Broadcast on topic {topic}",
                embedding=vector.tolist(),
                broadcast_type=kind,
                quality=quality,
                keywords=[],
                domains=[f"topic{topic}"],
            )
            self.items[created.pk] = (vector, kind, quality)


class Reader:
    """An agent with a stated profile and a hidden taste."""

    def __init__(self, world: World) -> None:
        rng = world.rng
        self.agent, token = make_agent()
        self.client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
        self.primary, self.secondary = (int(t) for t in rng.choice(len(world.centroids), 2, replace=False))
        self.liked_type = TYPES[int(rng.choice(4, p=TYPE_SKEW))]
        self.world = world
        ReaderProfile.objects.create(
            agent=self.agent,
            seeks_embedding=world.near(self.primary, 0.5).tolist(),
            embedding_model=configured_embedding_model(),
            version=timezone.now(),
        )

    def utility(self, item_id: int) -> float:
        vector, kind, quality = self.world.items[item_id]
        centroids = self.world.centroids
        taste = max(0.0, vector @ centroids[self.primary]) + max(0.0, vector @ centroids[self.secondary])
        return taste + 0.6 * (kind == self.liked_type) + 0.8 * (quality - 0.65)

    def follow_up(self, item_id: int) -> float:
        return 1.0 / (1.0 + math.exp(-6 * (self.utility(item_id) - 0.9)))

    def page(self) -> list[int]:
        body = self.client.get("/api/v1/feed?for_me=1&limit=10").json()
        return [int(item["item_id"]) for item in body["items"]]

    def read(self) -> None:
        rng = self.world.rng
        events = []
        for place, item_id in enumerate(self.page()):
            if rng.random() > 0.92**place:
                continue
            if rng.random() < self.follow_up(item_id):
                events.append({"item_id": str(item_id), "kind": "question", "dedup_key": f"q{item_id}"})
                score = 2 if self.utility(item_id) > 1.3 else 1
                self.client.post(f"/api/v1/items/{item_id}/feedback", {"score": score}, "application/json")
            elif self.utility(item_id) < 0.3 and rng.random() < 1 / 3:
                self.client.post(f"/api/v1/items/{item_id}/feedback", {"score": -1}, "application/json")
        if events:
            self.client.post("/eigenflux/api/v1/items/events", {"events": events}, "application/json")


def drain() -> None:
    """Hand the outbox to the impression-log and stats consumers, as the relay and the streams would."""
    consumers = {STREAM_REPLAY_LOG: ReplayLogConsumer(), STREAM_ITEM_STATS: ItemStatsConsumer()}
    for row in OutboxEvent.objects.filter(dispatched_at__isnull=True).order_by("pk"):
        consumer = consumers.get(row.stream)
        if consumer is not None and row.envelope.get("type") in consumer.event_types:
            consumer.handle(outbox_stream_event(row, group=consumer.group))
    OutboxEvent.objects.filter(dispatched_at__isnull=True).update(dispatched_at=timezone.now())


def age_one_day() -> None:
    """Every timestamp of the feed's tables a day earlier: tomorrow is now."""
    with connection.cursor() as cursor:
        for table in AGED_TABLES:
            cursor.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = %s "
                "AND data_type = 'timestamp with time zone'",
                [table],
            )
            columns = [row[0] for row in cursor.fetchall()]
            if columns:
                moved = ", ".join(f"{column} = {column} - interval '1 day'" for column in columns)
                cursor.execute(f"UPDATE {table} SET {moved}")  # noqa: S608 - names from the catalogue


def measure(readers: list[Reader], *, learned: bool) -> tuple[float, float]:
    """(mean clicks@10, mean nDCG@10) of the readers' first pages, by the learned ranker (readers with no history
    too: FEED_RANKER_FOR_NEWCOMERS) or the formula. Measured on a copy of the world: everything serving writes
    (impressions, served counts, outbox events) is rolled back, so measuring never changes what happens next."""
    settings.FEED_RANKER_ENABLED = settings.FEED_RANKER_FOR_NEWCOMERS = learned
    settings.FEED_EXPLORATION_POOL = 1  # no draw: the two rankings differ by the ranker alone
    servable = set(ProcessedItem.objects.filter(status="completed").values_list("pk", flat=True))
    clicks, gains = [], []
    try:
        with transaction.atomic():
            for reader in readers:
                page = reader.page()
                probabilities = [reader.follow_up(item_id) for item_id in page]
                ideal = sorted(reader.follow_up(item_id) for item_id in servable & reader.world.items.keys())[::-1]
                discounts = [1 / math.log2(place + 2) for place in range(10)]
                best = sum(g * d for g, d in zip(ideal[:10], discounts, strict=False))
                clicks.append(sum(probabilities))
                gains.append(sum(g * d for g, d in zip(probabilities, discounts, strict=False)) / best if best else 0.0)
            transaction.set_rollback(True)
    finally:
        settings.FEED_RANKER_ENABLED, settings.FEED_EXPLORATION_POOL = True, 3
        settings.FEED_RANKER_FOR_NEWCOMERS = False
    return float(np.mean(clicks)), float(np.mean(gains))


def ceiling(readers: list[Reader]) -> float:
    """Mean clicks@10 of the best re-ranking there is: the ten of the formula's best FEED_RANKER_DEPTH that the
    reader would most likely follow up (what a perfect model could serve, re-ranking as the learned one does)."""
    settings.FEED_RANKER_ENABLED, settings.FEED_EXPLORATION_POOL = False, 1
    clicks = []
    try:
        for reader in readers:
            depth = settings.FEED_RANKER_DEPTH
            entries = rank_entries(reader=reader.agent, page_size=10, depth=depth)[:depth]
            chances = sorted((reader.follow_up(entry.facts.item_id) for entry in entries), reverse=True)
            clicks.append(sum(chances[:10]))
    finally:
        settings.FEED_RANKER_ENABLED, settings.FEED_EXPLORATION_POOL = True, 3
    return float(np.mean(clicks))


def retrain(held_out: list[Reader]) -> str:
    excluded = frozenset(reader.agent.pk for reader in held_out)
    try:
        trained = ranker_train(days=28, held_out_days=1, skips=1, l2=ARGS.l2, excluded_readers=excluded)
    except TrainingRefused as exc:
        return f"not trained: {exc}"
    held = trained.model.metrics["held_out"]
    base = trained.model.metrics["baseline"]
    verdict = "active" if trained.activated else "refused"
    if ARGS.weights:
        document = trained.model.document
        pairs = zip(document["features"], document["weights"], strict=True)
        print("  weights: " + ", ".join(f"{name} {weight:+.2f}" for name, weight in pairs))
    return (
        f"model {trained.model.pk} {verdict}: AUC {held['auc']:.3f} vs {base['ranking']} {base['auc']:.3f}, "
        f"logged nDCG {held['logged_ndcg']:.3f} vs {base['logged_ndcg']:.3f}, "
        f"IPS {held['ips'] or 0:.3f} vs {base['ips'] or 0:.3f}"
    )


def row(day: int, held_out: list[Reader], cold: list[Reader]) -> list[str]:
    figures = [
        *measure(held_out, learned=False),
        *measure(held_out, learned=True),
        *measure(cold, learned=False),
        *measure(cold, learned=True),
    ]
    active = RankerModel.objects.filter(status="active").values_list("pk", flat=True).first()
    lift = (figures[2] / figures[0] - 1) * 100 if figures[0] else 0.0
    room = (ceiling(held_out) / figures[0] - 1) * 100 if figures[0] else 0.0
    return [str(day), f"{active or '-'}", *(f"{value:.3f}" for value in figures), f"{lift:+.1f}%", f"{room:+.1f}%"]


HEADER = ["day", "model", "held-out clicks@10 formula", "nDCG formula", "clicks@10 learned", "nDCG learned"]
HEADER += ["no-history clicks@10 formula", "nDCG formula", "clicks@10 learned", "nDCG learned", "clicks lift"]
HEADER += ["ceiling"]


def simulate() -> list[list[str]]:
    exploration_seed(ARGS.seed)  # the readers' exploration slots drawn alike from run to run
    world = World(ARGS.seed, ARGS.topics)
    trained = [Reader(world) for _ in range(ARGS.readers)]
    held_out = [Reader(world) for _ in range(ARGS.held_out)]
    cold = [Reader(world) for _ in range(ARGS.cold)]
    rows = []
    for day in range(ARGS.days + 1):
        world.publish(ARGS.items_per_day)
        rows.append(row(day, held_out, cold))
        print("| " + " | ".join(rows[-1]) + " |", flush=True)
        for reader in trained + held_out:
            reader.read()
        drain()
        age_one_day()
        print(f"  night {day}: {retrain(held_out)}", flush=True)
    return rows


def main() -> None:
    with scratch_test_db("bench_eigenflux_feed_sim", 13):
        settings.RATE_LIMIT_READ_PER_MINUTE = 0
        settings.RATE_LIMIT_PUBLISH_PER_MINUTE = 0
        settings.FEED_NEIGHBOURS_CACHE_SECONDS = 0  # the world ages under the cache's feet
        settings.FEED_RANKER_CHECK_SECONDS = 0
        settings.FEED_EXPLORATION_POOL = 3  # readers' own pages draw their exploration slot (a logged propensity)
        print(f"feed simulator, seed {ARGS.seed}, {timezone.now():%Y-%m-%d %H:%M} UTC")
        print("| " + " | ".join(HEADER) + " |")
        print("|" + "---|" * len(HEADER))
        simulate()


if __name__ == "__main__":
    main()
