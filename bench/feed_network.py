"""The network bench/feed_latency.py measures, written in bulk (COPY): agents with reader profiles, items with
embeddings near a few hundred topic centroids, counters, feedback, feed events and deliveries."""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import random
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
from django.conf import settings
from django.db import connection

from bench.seed import array as _array
from bench.seed import row as _row
from bench.seed import vector_text as _vector
from eigenflux.base.embedding_space import configured_embedding_model
from items.feed_ranking.concepts import item_concepts
from items.models import (
    Agent,
    FeedDelivery,
    FeedEvent,
    ItemFeedback,
    ItemStats,
    ProcessedItem,
    RawItem,
    ReaderProfile,
)

ROOT = Path(__file__).resolve().parent.parent
TYPES = (("supply", 0.35), ("demand", 0.25), ("info", 0.3), ("alert", 0.1))
DOMAINS = [f"domain{n}" for n in range(40)]
NOW = datetime(2026, 12, 1, tzinfo=UTC)
SPAN_DAYS = 60


class World:
    """Topic centroids and the random draws shared by items and readers."""

    def __init__(self, topics: int, seed: int = 29) -> None:
        self.rng = random.Random(seed)
        self.np = np.random.default_rng(seed)
        dims = settings.EMBEDDING_DIMENSIONS
        centroids = self.np.standard_normal((topics, dims)).astype(np.float32)
        self.centroids = centroids / np.linalg.norm(centroids, axis=1, keepdims=True)
        self.topics = topics
        corpus = ROOT / "bench" / "data" / "search_corpus.jsonl"
        self.texts = [json.loads(line)["content"] for line in corpus.open(encoding="utf-8") if line.strip()]

    def near(self, topic: int, spread: float) -> np.ndarray:
        noise = self.np.standard_normal(self.centroids.shape[1]).astype(np.float32)
        vector = self.centroids[topic] + spread * noise / np.sqrt(len(noise))
        return vector / np.linalg.norm(vector)

    def words(self, topic: int, count: int) -> list[str]:
        return [f"t{topic}w{self.rng.randrange(12)}" for _ in range(count)]

    def domains(self, topic: int) -> list[str]:
        first = DOMAINS[topic % len(DOMAINS)]
        return [first] if self.rng.random() < 0.6 else [first, self.rng.choice(DOMAINS)]


def _copy(cursor, table: str, columns: str, buffer: io.StringIO) -> None:
    with cursor.connection.cursor().copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
        copy.write(buffer.getvalue())


def seed_agents(world: World, count: int) -> tuple[int, list[int]]:
    """`count` agents with bio / seeks / offers, keywords and a ReaderProfile (seeks and offers vectors, and a
    clause vector per want for a fifth of them). Returns the first id less one, and each agent's seeks topic."""
    agents, profiles = io.StringIO(), io.StringIO()
    seeks_topics = []
    stamp = NOW.isoformat()
    base = Agent.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
    for n in range(base + 1, base + count + 1):
        seeks, offers = world.rng.randrange(world.topics), world.rng.randrange(world.topics)
        seeks_topics.append(seeks)
        keywords = world.words(seeks, 3) + world.words(offers, 2)
        text = world.rng.choice(world.texts)
        agents.write(
            _row(
                [n, f"feedbench-{n}", f"feedbench-{n}", f"feedbench-{n}", "f", "t", text[:200],
                 " ".join(world.words(offers, 4)), " ".join(world.words(seeks, 4)), _array(keywords), "{}",
                 stamp, stamp, stamp]
            )
        )  # fmt: skip
        parts_seeks = [world.near(seeks, 1.0).tolist() for _ in range(2)] if n % 5 == 0 else []
        profiles.write(
            _row(
                [n, _vector(world.near(seeks, 0.6)), _vector(world.near(offers, 0.6)),
                 json.dumps([[round(x, 4) for x in part] for part in parts_seeks]), "[]", stamp, stamp,
                 configured_embedding_model()]
            )
        )  # fmt: skip
    with connection.cursor() as cursor:
        _copy(
            cursor,
            Agent._meta.db_table,
            "id, name, name_key, name_shape_key, is_official, is_active, bio, offers, seeks, profile_keywords, "
            "country_codes, profile_keywords_version, created_at, updated_at",
            agents,
        )
        _copy(
            cursor,
            ReaderProfile._meta.db_table,
            "agent_id, seeks_embedding, offers_embedding, seeks_parts, offers_parts, version, updated_at, "
            "embedding_model",
            profiles,
        )
        cursor.execute(f"SELECT setval(pg_get_serial_sequence('{Agent._meta.db_table}', 'id'), {base + count})")
    return base, seeks_topics


def _item_rows(
    world: World, count: int, agents: int, base: int
) -> tuple[io.StringIO, io.StringIO, io.StringIO, list[int]]:
    raws, processed, stats = io.StringIO(), io.StringIO(), io.StringIO()
    kinds, shares = zip(*TYPES, strict=True)
    by_topic: dict[int, list[int]] = {}
    topic_of = []
    for pk in range(1, count + 1):
        topic = world.rng.randrange(world.topics)
        topic_of.append(topic)
        at = NOW - timedelta(days=SPAN_DAYS * (1 - pk / count), seconds=world.rng.randrange(60))
        group = pk
        earlier = by_topic.setdefault(topic, [])
        if earlier and world.rng.random() < 0.1:
            group = world.rng.choice(earlier[-20:])  # a repost of a recent item of its topic
        earlier.append(pk)
        content = f"{world.rng.choice(world.texts)} {' '.join(world.words(topic, 5))}"
        kind = world.rng.choices(kinds, shares)[0]
        quality = min(1.0, max(0.05, world.rng.betavariate(5, 2)))
        author = base + min(agents, int(world.rng.paretovariate(1.2)) + world.rng.randrange(agents) // 3)
        expire = (at + timedelta(days=3)).isoformat() if kind == "alert" else None
        digest = hashlib.sha256(content.encode()).hexdigest()
        raws.write(_row([pk, author, content, "", "", None, digest, at.isoformat()]))
        keywords = world.words(topic, 4)
        processed.write(
            _row(
                [pk, author, "completed", kind, content[:120], _array(keywords),
                 _array(world.domains(topic)), "en", round(quality, 3), group, _vector(world.near(topic, 1.0)),
                 "local", at.isoformat(), at.isoformat(), at.isoformat(), expire, "", "", "", "", "", "", 0, "", "",
                 _array([str(concept) for concept in item_concepts(content, keywords)]),
                 configured_embedding_model()]
            )
        )  # fmt: skip
        if world.rng.random() < 0.6:
            readers = int(world.np.poisson(3))
            ones, twos, minus = readers // 2, readers // 4, readers - readers // 2 - readers // 4
            touched = at + timedelta(hours=world.rng.random() * 48)
            stats.write(
                _row([pk, readers, ones + 2 * twos - minus, minus, 0, ones, twos, int(world.np.poisson(8)),
                      min(touched, NOW).isoformat()])
            )  # fmt: skip
    return raws, processed, stats, topic_of


PROCESSED_COLUMNS = (
    "raw_id, author_id, status, broadcast_type, summary, keywords, domains, lang, quality, group_id, embedding, "
    "analyzer, created_at, processed_at, updated_at, expire_time, reason, timeliness, geo, source_type, "
    "expected_response, suggestion, attempts, last_error, claimed_by, concepts, embedding_model"
)


def seed_items(world: World, count: int, agents: int, base: int) -> list[int]:
    raws, processed, stats, topic_of = _item_rows(world, count, agents, base)
    rebuilt = [
        index
        for index in ProcessedItem._meta.indexes
        if index.name in ("processed_search", "processed_domains") or "hnsw" in index.name
    ]
    with connection.cursor() as cursor:
        for index in rebuilt:
            cursor.execute(f"DROP INDEX IF EXISTS {index.name}")
        _copy(
            cursor,
            RawItem._meta.db_table,
            "id, author_id, content, notes, url, accept_reply, content_hash, created_at",
            raws,
        )
        _copy(cursor, ProcessedItem._meta.db_table, PROCESSED_COLUMNS, processed)
        _copy(
            cursor,
            ItemStats._meta.db_table,
            "item_id, readers, score_sum, score_minus_one, score_zero, score_one, score_two, consumed, updated_at",
            stats,
        )
        cursor.execute(f"SELECT setval(pg_get_serial_sequence('{RawItem._meta.db_table}', 'id'), {count})")
        cursor.execute("SET maintenance_work_mem = '512MB'")
    started = time.perf_counter()
    with connection.schema_editor(atomic=False) as editor:
        for index in rebuilt:
            editor.add_index(ProcessedItem, index)
    print(f"  indexes built in {time.perf_counter() - started:.0f} s", flush=True)
    return topic_of


def seed_history(world: World, base: int, seeks_topics: list[int], topic_of: list[int]) -> None:
    """Per reader: ~20 scores and ~5 feed events on items of its seeks topic (and some others), ~30 deliveries."""
    items_of: dict[int, list[int]] = {}
    for pk, topic in enumerate(topic_of, start=1):
        items_of.setdefault(topic, []).append(pk)
    feedback, events, deliveries = io.StringIO(), io.StringIO(), io.StringIO()
    everything = len(topic_of)
    for agent, topic in enumerate(seeks_topics, start=base + 1):
        own = items_of.get(topic) or [1]
        chosen = {world.rng.choice(own) for _ in range(15)} | {world.rng.randrange(1, everything + 1) for _ in range(5)}
        for pk in chosen:
            score = world.rng.choices((-1, 0, 1, 2), (0.15, 0.25, 0.4, 0.2))[0]
            at = (NOW - timedelta(hours=world.rng.random() * 24 * SPAN_DAYS)).isoformat()
            feedback.write(_row([agent, pk, score, f"fb-{agent}-{pk}", at, at]))
        for n, pk in enumerate(list(chosen)[:5]):
            kind = world.rng.choice(("surface", "question", "discussion", "task"))
            at = (NOW - timedelta(hours=world.rng.random() * 24 * SPAN_DAYS)).isoformat()
            events.write(_row([agent, pk, kind, "", f"ev-{n}", "", "", at]))
        for pk in {world.rng.randrange(int(everything * 0.8), everything + 1) for _ in range(30)}:
            at = (NOW - timedelta(hours=world.rng.random() * 24 * 10)).isoformat()
            deliveries.write(_row([agent, pk, pk, f"imp_seed_{agent}", at]))
    with connection.cursor() as cursor:
        _copy(
            cursor, ItemFeedback._meta.db_table, "reader_id, item_id, score, event_id, created_at, updated_at", feedback
        )
        _copy(
            cursor,
            FeedEvent._meta.db_table,
            "agent_id, item_id, kind, impression_id, dedup_key, brief, channel, created_at",
            events,
        )
        _copy(
            cursor, FeedDelivery._meta.db_table, "agent_id, item_id, group_id, impression_id, delivered_at", deliveries
        )


def seed(args: argparse.Namespace) -> None:
    started = time.perf_counter()
    world = World(args.topics)
    base, seeks_topics = seed_agents(world, args.agents)
    print(f"  {args.agents:,} agents with profiles in {time.perf_counter() - started:.0f} s", flush=True)
    topic_of = seed_items(world, args.items, args.agents, base)
    print(f"  {args.items:,} items in {time.perf_counter() - started:.0f} s", flush=True)
    seed_history(world, base, seeks_topics, topic_of)
    with connection.cursor() as cursor:
        for model in (Agent, ReaderProfile, RawItem, ProcessedItem, ItemStats, ItemFeedback, FeedEvent, FeedDelivery):
            cursor.execute(f"VACUUM ANALYZE {model._meta.db_table}")
    print(f"seeded in {time.perf_counter() - started:.0f} s", flush=True)
