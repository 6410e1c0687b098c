"""A network of a given scale written in bulk, for every bench that needs one: `--scale 10k|100k|1M` items with
1k / 10k / 100k agents (reader profiles with clauses, feedback, feed events, deliveries, the impression log).

Items are the labelled search corpus (bench/data/search_corpus.jsonl: text, type, domains, language) varied:
its text with a few extra words (some common, so a query can match a third of the network), its real embedding
(the configured model's, computed once per corpus text) blended with another text's and perturbed, so clusters
and filters have realistic sizes and no two items share a vector. For filtered-search benches, filters of known
selectivity independent of the content: tags `tag-30` … `tag-0.1` in `domains` (30 % … 0.1 % of the items),
rare languages (`de` 3 %, `fr` 1 %, `es` 0.3 %, `ko` 0.1 %), creation times spread evenly over the last year
(a window of d days keeps d/365), and alerts expiring 30 days after they were written.

Everything goes in by COPY with the secondary indexes (HNSW, GIN, btree) dropped, and is indexed once filled;
each phase is timed. The scratch database is kept (another bench reuses it); `--drop` drops it.

    flock /tmp/eigenflux-bench.lock .venv/bin/python bench/seed.py --scale 100k [--db NAME] [--drop]
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

SCALES = {"10k": (10_000, 1_000), "100k": (100_000, 10_000), "1M": (1_000_000, 100_000)}
TAGS = {"tag-30": 0.30, "tag-10": 0.10, "tag-3": 0.03, "tag-1": 0.01, "tag-0.3": 0.003, "tag-0.1": 0.001}
RARE_LANGS = {"de": 0.03, "fr": 0.01, "es": 0.003, "ko": 0.001}
SPAN_DAYS = 365
ALERT_DAYS = 30
CHUNK = 20_000
COMMON = ["team", "update", "week", "project", "available", "details", "contact", "soon"]
RARE = [f"{a}{b}" for a in ("alpha", "beta", "gamma", "delta", "omega") for b in ("wave", "stone", "leaf", "port")]
PROCESSED_COLUMNS = (
    "raw_id, author_id, status, broadcast_type, summary, keywords, domains, lang, quality, group_id, embedding, "
    "analyzer, created_at, processed_at, updated_at, expire_time, reason, timeliness, geo, source_type, "
    "expected_response, suggestion, attempts, last_error, claimed_by, concepts, embedding_model"
)


def escape(value) -> str:
    if value is None:
        return "\\N"
    return str(value).replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def row(values: list) -> str:
    return "\t".join(escape(value) for value in values) + "\n"


def array(values: list[str]) -> str:
    return "{" + ",".join('"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"' for v in values) + "}"


def vector_text(values: np.ndarray) -> str:
    return "[" + ",".join(f"{x:.4f}" for x in values.tolist()) + "]"


def copy(cursor, table: str, columns: str, buffer: io.StringIO) -> None:
    with cursor.connection.cursor().copy(f"COPY {table} ({columns}) FROM STDIN") as stream:
        stream.write(buffer.getvalue())


class Corpus:
    """The real texts and their embeddings, and the draws every table shares (seeded: the same network each run)."""

    def __init__(self, seed: int = 11) -> None:
        from pipeline.llm import embed

        path = ROOT / "bench" / "data" / "search_corpus.jsonl"
        self.docs = [json.loads(line) for line in path.open(encoding="utf-8") if line.strip()]
        self.vectors = np.asarray(embed([doc["content"] for doc in self.docs]).value, dtype=np.float32)
        self.vectors /= np.linalg.norm(self.vectors, axis=1, keepdims=True)
        self.rng = np.random.default_rng(seed)
        self.now = datetime.now(UTC).replace(microsecond=0)
        self._indexed: dict[int, tuple[str, str, list[int]]] = {}

    def blend(self, base: np.ndarray) -> np.ndarray:
        """Vectors near the corpus's own: the base text's embedding, a little of another's, and noise."""
        other = self.rng.integers(0, len(self.docs), len(base))
        noise = self.rng.standard_normal((len(base), self.vectors.shape[1])).astype(np.float32)
        mixed = 0.85 * self.vectors[base] + 0.15 * self.vectors[other] + 0.5 * noise / np.sqrt(noise.shape[1])
        return mixed / np.linalg.norm(mixed, axis=1, keepdims=True)

    def indexed(self, base: int) -> tuple[str, str, list[int]]:
        """A corpus text's index_text()s (keywords, content) and concepts, computed once per text."""
        if base not in self._indexed:
            from items.feed_ranking.concepts import item_concepts
            from items.textsearch import index_text

            doc = self.docs[base]
            concepts = item_concepts(doc["content"], doc["key_terms"])
            self._indexed[base] = (index_text(" ".join(doc["key_terms"])), index_text(doc["content"]), concepts)
        return self._indexed[base]


def item_chunk(corpus: Corpus, first: int, count: int, total: int, agents: tuple[int, int]):
    """COPY buffers for items first+1 .. first+count (raw, staged processed, staged text, stats), and their
    corpus texts."""
    from eigenflux.base.embedding_space import configured_embedding_model

    rng, model = corpus.rng, configured_embedding_model()
    base = rng.integers(0, len(corpus.docs), count)
    vectors = corpus.blend(base)
    ages = rng.random(count) * SPAN_DAYS
    tags = {tag: rng.random(count) < share for tag, share in TAGS.items()}
    lang_draw = rng.random(count)
    raws, processed, texts, stats = io.StringIO(), io.StringIO(), io.StringIO(), io.StringIO()
    for n in range(count):
        pk, doc = first + n + 1, corpus.docs[base[n]]
        keywords_text, content_text, concepts = corpus.indexed(int(base[n]))
        extra = " ".join([*rng.choice(COMMON, 2, replace=False), str(rng.choice(RARE)), f"batchref{pk}"])
        at = corpus.now - timedelta(days=float(ages[n]))
        author = agents[0] + 1 + int(min(agents[1] - 1, rng.pareto(1.2) * agents[1] / 50))
        lang, edge = doc["expected_lang"], 0.0
        for rare, share in RARE_LANGS.items():
            edge += share
            if lang_draw[n] < edge:
                lang = rare
                break
        domains = list(doc["domains"]) + [tag for tag, chosen in tags.items() if chosen[n]]
        expire = at + timedelta(days=ALERT_DAYS) if doc["broadcast_type"] == "alert" else None
        content = f"{doc['content']} {extra}"
        raws.write(row([pk, author, content, "", "", None, hashlib.sha256(content.encode()).hexdigest(), at]))
        processed.write(
            row(
                [pk, author, "completed", doc["broadcast_type"], doc["content"][:120], array(doc["key_terms"]),
                 array(domains), lang, round(0.5 + 0.5 * rng.random(), 3), pk, vector_text(vectors[n]), "local",
                 at, at, at, expire, "", "", "", "", "", "", 0, "", "", array([str(c) for c in concepts]), model]
            )
        )  # fmt: skip
        texts.write(row([pk, keywords_text, content_text[:600], f"{content_text} {extra}"]))
        if rng.random() < 0.6:
            readers = int(rng.poisson(3))
            ones, twos = readers // 2, readers // 4
            minus = readers - ones - twos
            stats.write(row([pk, readers, ones + 2 * twos - minus, minus, 0, ones, twos, int(rng.poisson(8)), at]))
    return raws, processed, texts, stats, base


def rebuilt_indexes(models) -> list[tuple[type, object]]:
    return [(model, index) for model in models for index in model._meta.indexes]


def drop_indexes(indexes) -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        for _, index in indexes:
            cursor.execute(f"DROP INDEX IF EXISTS {index.name}")


def build_indexes(indexes, maintenance_work_mem: str) -> dict[str, float]:
    """Each dropped index built again from the model's own definition; seconds per index."""
    from django.db import connection

    took = {}
    with connection.cursor() as cursor:
        cursor.execute(f"SET maintenance_work_mem = '{maintenance_work_mem}'")
    for model, index in indexes:
        started = time.perf_counter()
        with connection.schema_editor(atomic=False) as editor:
            editor.add_index(model, index)
        took[index.name] = time.perf_counter() - started
    return took


def seed_items(corpus: Corpus, items: int, agents: tuple[int, int]) -> np.ndarray:
    """Every item (raw, processed with its search vector, stats) in chunks: COPY, then one INSERT … SELECT per
    chunk from a staging table to compute the search vector in PostgreSQL. Returns each item's corpus text."""
    from django.db import connection

    from items.models import ItemStats, ProcessedItem, RawItem
    from items.textsearch import search_vector_sql

    table = ProcessedItem._meta.db_table
    select = ", ".join("p." + name for name in PROCESSED_COLUMNS.split(", "))
    bases = []
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE TEMP TABLE seed_processed (LIKE {table} INCLUDING DEFAULTS)")
        cursor.execute("CREATE TEMP TABLE seed_text (id bigint PRIMARY KEY, k text, s text, c text)")
        for first in range(0, items, CHUNK):
            raws, processed, texts, stats, base = item_chunk(corpus, first, min(CHUNK, items - first), items, agents)
            bases.append(base)
            copy(cursor, RawItem._meta.db_table, "id, author_id, content, notes, url, accept_reply, content_hash, "
                 "created_at", raws)  # fmt: skip
            copy(cursor, "seed_processed", PROCESSED_COLUMNS, processed)
            copy(cursor, "seed_text", "id, k, s, c", texts)
            cursor.execute(
                f"INSERT INTO {table} ({PROCESSED_COLUMNS}, search_vector) "  # noqa: S608
                f"SELECT {select}, {search_vector_sql('t.k', 't.s', 't.c')} "
                "FROM seed_processed p JOIN seed_text t ON t.id = p.raw_id"
            )
            cursor.execute("TRUNCATE seed_processed, seed_text")
            copy(cursor, ItemStats._meta.db_table, "item_id, readers, score_sum, score_minus_one, score_zero, "
                 "score_one, score_two, consumed, updated_at", stats)  # fmt: skip
        cursor.execute("DROP TABLE seed_processed, seed_text")
        cursor.execute(f"SELECT setval(pg_get_serial_sequence('{RawItem._meta.db_table}', 'id'), {items})")
    return np.concatenate(bases)


def seed(scale: str) -> dict[str, float]:
    """Write a network of `scale` into the current (empty, migrated) database; seconds per phase."""
    from django.db import connection

    from bench.seed_people import seed_agents, seed_history
    from items.models import (
        FeedDelivery,
        FeedEvent,
        FeedImpression,
        ItemFeedback,
        ItemStats,
        ProcessedItem,
        RawItem,
        ReaderProfile,
    )

    items, agents = SCALES[scale]
    models = (RawItem, ProcessedItem, ItemStats, ReaderProfile, ItemFeedback, FeedEvent, FeedDelivery, FeedImpression)
    phases: dict[str, float] = {}
    started = mark = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal mark
        phases[name] = time.perf_counter() - mark
        mark = time.perf_counter()
        print(f"  {name}: {phases[name]:.0f} s", flush=True)

    corpus = Corpus()
    lap("corpus embeddings")
    indexes = rebuilt_indexes(models)
    drop_indexes(indexes)
    first_agent = seed_agents(corpus, agents)
    lap(f"{agents:,} agents with profiles (COPY)")
    bases = seed_items(corpus, items, (first_agent, agents))
    lap(f"{items:,} items (COPY, search vectors)")
    seed_history(corpus, (first_agent, agents), bases)
    lap("history: feedback, feed events, deliveries, impressions (COPY)")
    took = build_indexes(indexes, "6GB" if items > 200_000 else "768MB")
    for name, seconds in sorted(took.items(), key=lambda pair: -pair[1])[:8]:
        print(f"    index {name}: {seconds:.0f} s")
    lap(f"{len(indexes)} indexes built")
    with connection.cursor() as cursor:
        for model in (*models, *{field.related_model for field in RawItem._meta.fields if field.is_relation}):
            cursor.execute(f"VACUUM ANALYZE {model._meta.db_table}")
    lap("VACUUM ANALYZE")
    phases["total"] = time.perf_counter() - started
    return phases


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", choices=SCALES, required=True)
    parser.add_argument("--db", default="", help="scratch database (default bench_eigenflux_seed_<scale>)")
    parser.add_argument("--drop", action="store_true", help="drop the scratch database at the end")
    return parser.parse_args()


def database_name(scale: str) -> str:
    return f"bench_eigenflux_seed_{scale.lower()}"


def use_seeded(scale: str) -> str:
    """Point the default connection at the kept network of `scale` and return the name it had (refused when its
    vectors are of another embedding space: require_space)."""
    from django.db import connection

    old_name = connection.settings_dict["NAME"]
    connection.settings_dict["NAME"] = database_name(scale)
    try:
        require_space(f"seed it again (bench/seed.py --scale {scale})")
    except BaseException:
        connection.close()
        connection.settings_dict["NAME"] = old_name
        raise
    return old_name


def require_space(remedy: str) -> None:
    """Stop, naming `remedy`, when the connected database's items carry vectors of another embedding model or space
    than the configured one (a network kept from before a change): search and the feed would see none of them."""
    from eigenflux.base.embedding_space import configured_embedding_model
    from items.models import ProcessedItem, ReaderProfile

    current = configured_embedding_model()
    for model in (ProcessedItem, ReaderProfile):
        other = model.objects.exclude(embedding_model__in=["", current]).values_list("embedding_model", flat=True)
        stamp = other.first()
        if stamp is not None:
            raise SystemExit(
                f"the kept network's vectors ({model._meta.verbose_name_plural}) include {stamp}'s, the configured "
                f"model makes {current}'s: {remedy}"
            )


def main() -> None:
    args = arguments()
    from bench.scratch import offline_django

    offline_django()
    from django.db import connection

    connection.settings_dict["TEST"]["NAME"] = args.db or database_name(args.scale)
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=False, serialize=False)
    try:
        phases = seed(args.scale)
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_database_size(current_database())")
            size = cursor.fetchone()[0]
    finally:
        if args.drop:
            connection.creation.destroy_test_db(old_name, verbosity=0)
        else:
            connection.close()
            connection.settings_dict["NAME"] = old_name
    items, agents = SCALES[args.scale]
    print("\n| scale | items | agents | seeding s | database MB | bytes per item |\n|---|---|---|---|---|---|")
    print(
        f"| {args.scale} | {items:,} | {agents:,} | {phases['total']:.0f} | {size / 2**20:.0f} | {size / items:,.0f} |"
    )


if __name__ == "__main__":
    main()
