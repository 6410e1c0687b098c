"""Feed quality on a labelled network (bench/data/README.md, "Feed readers"): 24 reader agents (8 English, 8
Chinese, 8 Japanese) with bio / offers / seeks and graded judgments, and 185 broadcasts (19 topics of the search
corpus, reposts included, plus vague spam) published in random order through the real pipeline (publish API ->
outbox relay -> cg:item:publish and cg:profile:update with the offline local analyzer). Prints nDCG@10 per
language and per feed (native `for_me=1`, the EigenFlux client's `feed poll` refresh), the vague spam in the
top-10s, and the newest-first feed as the recency reference; the tuning half of the readers (SHA-256 of the
reader id, first byte even) and the held-out half separately.

Uses a scratch database on the embedded (or DATABASE_URL) PostgreSQL, dropped at the end, and a dedicated
Redis db (BENCH_REDIS_DB, default 12) that it flushes before and after.

    flock /tmp/eigenflux-bench.lock .venv/bin/python bench/feed_quality.py [--show READER] [--json out.json]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import statistics
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "bench" / "data"
sys.path.insert(0, str(ROOT))
SCRATCH_DB = "bench_eigenflux_feed_quality"
TOPICS = ("gpu", "gpuhw", "k8s", "cve", "tr", "lab", "rust", "ml", "llm", "co", "pay", "fr", "ty", "py", "ds")
TOPICS += ("law", "vid", "pg", "apt")
LANGS = ("en", "zh", "ja")
FEEDS = ("for_me", "poll", "recency")
ORDER_SEED = 29  # the publishing order

parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--show", metavar="READER", help="print a reader's top 10s with grades (all: every reader)")
parser.add_argument("--explain", metavar="READER", help="print the reader's ranking with each item's signals")
parser.add_argument(
    "--sweep",
    type=Path,
    help="a JSON list of settings overrides: each is measured on the tuning half (for_me) before the main run",
)
parser.add_argument("--json", type=Path, help="write the figures to this file as well")
parser.add_argument(
    "--push",
    action="store_true",
    help="also score every completed broadcast for every reader as a match push does (docs/feed.md#match-push): "
    "how many would be pushed at MATCH_PUSH_THRESHOLD and how many of those the reader graded 2 or 3",
)
parser.add_argument(
    "--network",
    metavar="NAME",
    help="a network written apart instead (bench/data/feed_NAME/: broadcasts.jsonl and readers.jsonl with "
    "per-broadcast grades, junk flagged); its readers are reported (and swept) as one set",
)
ARGS = parser.parse_args()
for name in ("LLM_API_KEY", "OPENAI_API_KEY", "LLM_PROVIDER"):
    os.environ.pop(name, None)
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "eigenflux.settings")
os.environ.setdefault("LOG_LEVEL", "WARNING")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.test import Client  # noqa: E402

from bench.corpus_publish import publish_wave  # noqa: E402
from bench.scratch import scratch_test_db  # noqa: E402
from items.models import ProcessedItem  # noqa: E402
from items.services.agents import agent_create, agent_token_create  # noqa: E402
from pipeline.consumers.item_publish import ItemPublishConsumer  # noqa: E402
from pipeline.consumers.profile_update import ProfileUpdateConsumer  # noqa: E402
from pipeline.runtime.supervisor import Supervisor  # noqa: E402
from pipeline.services import pipeline_services  # noqa: E402


def load_jsonl(name: str) -> list[dict]:
    with (DATA / name).open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def network() -> tuple[list[dict], list[dict]]:
    """(readers, broadcasts): the labelled corpus's, or with --network the written-apart set's (a junk broadcast
    counts as vague spam; grades are per broadcast)."""
    if not ARGS.network:
        return load_jsonl("feed_readers.jsonl"), broadcasts()
    folder = f"feed_{ARGS.network}"
    docs = [
        doc | {"topic": "spam" if doc.get("junk") else "apart", "broadcast_type": "?"}
        for doc in load_jsonl(f"{folder}/broadcasts.jsonl")
    ]
    return load_jsonl(f"{folder}/readers.jsonl"), docs


def broadcasts() -> list[dict]:
    corpus = [doc for doc in load_jsonl("search_corpus.jsonl") if doc["topic"] in TOPICS]
    spam = [doc | {"topic": "spam", "broadcast_type": "spam"} for doc in load_jsonl("feed_spam.jsonl")]
    return corpus + spam


def tuning(reader_id: str) -> bool:
    """The labelled corpus's tuning half (a network written apart has no halves: every reader counts as tuning)."""
    if ARGS.network:
        return True
    return hashlib.sha256(reader_id.encode()).digest()[0] % 2 == 0


def grade(reader: dict, doc: dict) -> int:
    grades = reader["grades"]
    return grades.get(doc["id"], grades.get(f"{doc['topic']}:{doc['broadcast_type']}", 0))


def dcg(gains: list[int]) -> float:
    return sum((2**g - 1) / math.log2(rank + 2) for rank, g in enumerate(gains))


# --- loading through the pipeline ---------------------------------------------------------------------------
def run_pipeline_burst() -> None:
    # One handler thread: a repost is enriched after its original has completed, as in real life.
    consumers = [ItemPublishConsumer, ProfileUpdateConsumer]
    services = pipeline_services(consumers, housekeeping=False, burst=True)
    Supervisor(consumers, services=services, concurrency=1, burst=True).run()


def publish(docs: list[dict]) -> dict[int, str]:
    tokens = {
        author: agent_token_create(agent=agent_create(name=author)).token for author in {d["author"] for d in docs}
    }
    originals = [doc for doc in docs if "duplicate_of" not in doc]
    reposts = [doc for doc in docs if "duplicate_of" in doc]
    rng = random.Random(ORDER_SEED)
    rng.shuffle(originals)
    rng.shuffle(reposts)
    item_to_doc: dict[int, str] = {}
    for wave in (originals, reposts):
        item_to_doc.update(publish_wave(wave, tokens))
        run_pipeline_burst()
    return item_to_doc


def create_readers(readers: list[dict]) -> dict[str, Client]:
    clients = {}
    for reader in readers:
        token = agent_token_create(agent=agent_create(name=reader["id"])).token
        client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
        profile = {key: reader[key] for key in ("bio", "offers", "seeks")}
        response = client.put("/api/v1/agents/me", profile, content_type="application/json")
        if response.status_code != 200:
            raise SystemExit(f"profile of {reader['id']} failed: {response.status_code} {response.content[:300]}")
        clients[reader["id"]] = client
    return clients


# --- the feeds ----------------------------------------------------------------------------------------------
def feed_ids(client: Client, feed: str) -> list[int]:
    if feed == "for_me":
        response = client.get("/api/v1/feed", {"for_me": 1, "limit": 10})
    elif feed == "poll":
        prefix = settings.EIGENFLUX_COMPAT_PREFIX
        response = client.get(f"/{prefix}/api/v1/items/feed", {"action": "refresh", "limit": 10})
    else:
        response = client.get("/api/v1/feed", {"limit": 10})
    if response.status_code != 200:
        raise SystemExit(f"{feed} failed: {response.status_code} {response.content[:300]}")
    body = response.json()
    items = body["data"]["items"] if feed == "poll" else body["items"]
    return [int(item["item_id"]) for item in items]


def measure(readers, clients, docs, item_to_doc) -> dict:
    rows = ProcessedItem.objects.filter(pk__in=item_to_doc, status="completed").values_list("pk", "group_id")
    group_of = {item_to_doc[pk]: group or pk for pk, group in rows}
    results: dict = {"per_reader": {}, "completed": len(group_of), "published": len(item_to_doc)}
    statuses = ProcessedItem.objects.filter(pk__in=item_to_doc).exclude(status="completed")
    results["not_completed"] = {
        item_to_doc[pk]: f"{status} {reason}" for pk, status, reason in statuses.values_list("pk", "status", "reason")
    }
    for reader in readers:
        # The ideal: the best member of each group the reader could be served.
        best: dict[int, int] = {}
        for doc_id, group in group_of.items():
            best[group] = max(best.get(group, 0), grade(reader, docs[doc_id]))
        ideal = dcg(sorted((g for g in best.values() if g), reverse=True)[:10])
        entry = {}
        for feed in FEEDS:
            found = [item_to_doc.get(pk, "?") for pk in feed_ids(clients[reader["id"]], feed)]
            gains = [grade(reader, docs[doc_id]) if doc_id in docs else 0 for doc_id in found]
            entry[feed] = {
                "ndcg10": dcg(gains[:10]) / ideal if ideal else 0.0,
                "junk": sum(1 for doc_id in found[:10] if docs.get(doc_id, {}).get("topic") == "spam"),
                "top10": [f"{doc_id}:{gain}" for doc_id, gain in zip(found, gains, strict=True)],
            }
            if ARGS.show in (reader["id"], "all"):
                print(f"{reader['id']:<22}{feed:<8}{entry[feed]['ndcg10']:.2f}  {' '.join(entry[feed]['top10'])}")
        results["per_reader"][reader["id"]] = entry
    return results


def explain(reader: dict, docs: dict[str, dict], item_to_doc: dict[int, str]) -> None:
    from items.feed_ranking import rank_feed
    from items.models import Agent

    agent = Agent.objects.get(name=reader["id"])
    print(f"{reader['id']}: keywords {agent.profile_keywords}")
    for position, entry in enumerate(rank_feed(reader=agent, page_size=10, depth=60)):
        doc = docs[item_to_doc[entry.item.pk]]
        parts = " ".join(f"{name[:5]}={value:.2f}" for name, value in entry.parts.items() if value)
        print(
            f"{position:>3} {doc['id']:<7}g{grade(reader, doc)} {entry.score:5.2f} {parts} "
            f"q={entry.item.quality} kw={entry.item.keywords[:4]}"
        )


def sweep(readers: list[dict], clients: dict[str, Client], docs: dict[str, dict], item_to_doc) -> None:
    """Tuning: for_me nDCG@10 of the tuning half under each settings override (the poll would spend the seen
    memory). Held-out readers are not looked at."""
    chosen = [reader for reader in readers if tuning(reader["id"])]
    global FEEDS
    saved_feeds, FEEDS = FEEDS, ("for_me",)
    try:
        for overrides in json.loads(ARGS.sweep.read_text()):
            saved = {name: getattr(settings, name) for name in overrides}
            for name, value in overrides.items():
                setattr(settings, name, value)
            results = measure(chosen, clients, docs, item_to_doc)
            for name, value in saved.items():
                setattr(settings, name, value)
            cells = []
            for lang in (*LANGS, "all"):
                values = [
                    results["per_reader"][r["id"]]["for_me"]["ndcg10"] for r in chosen if lang in ("all", r["lang"])
                ]
                cells.append(f"{lang} {statistics.mean(values):.3f}")
            junk = sum(entry["for_me"]["junk"] for entry in results["per_reader"].values())
            print(f"sweep {'  '.join(cells)}  junk {junk}  {overrides}")
    finally:
        FEEDS = saved_feeds


def push_precision(readers: list[dict], docs: dict[str, dict], item_to_doc: dict[int, str]) -> None:
    """Match push on this network: each completed broadcast scored for every reader (scores_for_readers, as
    items.services.match_push does for the online readers near a new item), pushed when the score reaches
    MATCH_PUSH_THRESHOLD with a relevance part; printed per threshold around the setting."""
    from items.feed_ranking import scores_for_readers
    from items.models import Agent
    from items.services.match_push import RELEVANCE_PARTS

    by_name = {reader["id"]: reader for reader in readers}
    agents = list(Agent.objects.filter(name__in=by_name))
    rows = []
    for item in ProcessedItem.objects.filter(pk__in=item_to_doc, status="completed"):
        for agent, ranked in scores_for_readers(readers=agents, item=item):
            relevant = sum(ranked.parts.get(name, 0.0) for name in RELEVANCE_PARTS) > 0
            rows.append((ranked.score, relevant, grade(by_name[agent.name], docs[item_to_doc[item.pk]])))
    wanted = sum(gain >= 2 for _, _, gain in rows)
    print(f"\nMatch push: {len(rows)} reader-broadcast pairs, {wanted} graded 2 or 3")
    base = settings.MATCH_PUSH_THRESHOLD
    for threshold in (base - 1, base, base + 1, base + 2):
        pushed = [gain for score, relevant, gain in rows if relevant and score >= threshold]
        good = sum(gain >= 2 for gain in pushed)
        print(
            f"threshold {threshold:g}: pushed {len(pushed)}, graded 2-3 {good} "
            f"(precision {good / len(pushed) if pushed else 0:.2f}, recall {good / wanted if wanted else 0:.2f}), "
            f"graded 0 {sum(gain == 0 for gain in pushed)}"
        )


def report(results: dict, readers: list[dict]) -> None:
    print(
        f"\nFeed quality: {len(readers)} readers, {results['completed']} of {results['published']} broadcasts "
        "completed by the local analyzer; nDCG@10 (gain 2^grade - 1) and vague spam in the top 10s"
    )
    print(f"{'feed':<9}{'half':<10}" + "".join(f"{lang:>8}" for lang in (*LANGS, "all")) + f"{'junk':>7}{'zeros':>7}")
    for feed in FEEDS:
        halves = (("all", None),) if ARGS.network else (("tuning", True), ("held-out", False), ("all", None))
        for half, keep in halves:
            chosen = [r for r in readers if keep is None or tuning(r["id"]) == keep]
            cells = []
            for lang in (*LANGS, "all"):
                values = [results["per_reader"][r["id"]][feed]["ndcg10"] for r in chosen if lang in ("all", r["lang"])]
                cells.append(f"{statistics.mean(values):>8.3f}" if values else f"{'-':>8}")
            junk = sum(results["per_reader"][r["id"]][feed]["junk"] for r in chosen)
            zeros = sum(results["per_reader"][r["id"]][feed]["ndcg10"] == 0 for r in chosen)
            print(f"{feed:<9}{half:<10}{''.join(cells)}{junk:>7}{zeros:>7}")
    outcomes = Counter(results["not_completed"].values())
    print(f"not completed: {sum(outcomes.values())} ({', '.join(f'{n} {o}' for o, n in sorted(outcomes.items()))})")
    counts = {half: sum(tuning(r["id"]) == (half == "tuning") for r in readers) for half in ("tuning", "held-out")}
    print(
        f"readers: tuning {counts['tuning']}, held-out {counts['held-out']}; junk: vague-spam items in the top 10s; "
        "zeros: readers with nDCG@10 = 0; recency: the newest-first feed"
    )


def main() -> None:
    readers, corpus = network()
    docs = {doc["id"]: doc for doc in corpus}
    settings.RATE_LIMIT_READ_PER_MINUTE = 0
    with scratch_test_db(SCRATCH_DB, 12):
        clients = create_readers(readers)
        item_to_doc = publish(list(docs.values()))
        if ARGS.explain:
            explain(next(r for r in readers if r["id"] == ARGS.explain), docs, item_to_doc)
        if ARGS.sweep:
            sweep(readers, clients, docs, item_to_doc)
        results = measure(readers, clients, docs, item_to_doc)
        if ARGS.push:
            push_precision(readers, docs, item_to_doc)
    report(results, readers)
    if ARGS.json:
        ARGS.json.write_text(json.dumps(results, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
