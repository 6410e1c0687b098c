"""Search quality on the labelled corpus in bench/data: every broadcast goes through the real pipeline (publish
API -> outbox relay -> cg:item:publish with the offline local analyzer), every query runs in every mode
through the search API, and the script prints nDCG@10, precision@5, recall@20 and the share of queries
with no useful result per mode and language, the nonsense queries that returned anything, near-duplicate
grouping, and the local embedding's cost (ms per item, process memory).

Uses a scratch database on the embedded (or DATABASE_URL) PostgreSQL, dropped at the end, and a
dedicated Redis db (BENCH_REDIS_DB, default 12) that it flushes before and after.

    flock /tmp/eigenflux-bench.lock .venv/bin/python bench/search_quality.py [--embedding e5|minilm|hashing]
        [--min-similarity X] [--calibrate] [--json results.json] [--queries search_queries_independent.jsonl]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SCRATCH_DB = "bench_eigenflux_search_quality"
MODES = ("keyword", "semantic", "hybrid")
DEPTH = 20  # results asked per query (recall@20)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--embedding", choices=("e5", "minilm", "hashing"), help="LOCAL_EMBEDDING for this run")
    parser.add_argument("--min-similarity", type=float, help="SEARCH_MIN_SIMILARITY for this run")
    parser.add_argument(
        "--calibrate", action="store_true", help="also sweep the semantic floor over the corpus and suggest a value"
    )
    parser.add_argument("--json", type=Path, help="write the figures to this file as well")
    parser.add_argument(
        "--queries",
        default="search_queries.jsonl",
        help="the labelled query file in bench/data (search_queries_independent.jsonl: written apart from tuning)",
    )
    parser.add_argument(
        "--show", metavar="LANG", help="print each tuning-half query of this language with its top results"
    )
    parser.add_argument("--show-held-out", action="store_true", help="with --show: the held-out queries too")
    return parser.parse_args()


ARGS = parse_args()
# The offline default, whatever the caller's environment says: this measures the local analyzer.
for name in ("LLM_API_KEY", "OPENAI_API_KEY", "LLM_PROVIDER"):
    os.environ.pop(name, None)
if ARGS.embedding:
    os.environ["LOCAL_EMBEDDING"] = ARGS.embedding
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "eigenflux.settings")
os.environ.setdefault("LOG_LEVEL", "WARNING")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402

from bench.corpus_publish import publish_wave  # noqa: E402
from bench.search_labels import LANGS, SPLIT_SEED, dcg, grade, load_jsonl, tuning_half  # noqa: E402
from eigenflux.base.redis import get_redis  # noqa: E402
from items.models import ProcessedItem  # noqa: E402
from items.services.agents import agent_create, agent_token_create  # noqa: E402
from pipeline import llm  # noqa: E402
from pipeline.consumers.item_publish import ItemPublishConsumer  # noqa: E402
from pipeline.llm.embeddings import semantic_floor  # noqa: E402
from pipeline.runtime.supervisor import Supervisor  # noqa: E402
from pipeline.services import pipeline_services  # noqa: E402
from tests.conftest import redis_url_with_db  # noqa: E402


def rss_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def query_metrics(query: dict, found: list[str], docs: dict[str, dict], indexed: set[str]) -> dict[str, float]:
    grades = {doc_id: grade(query, docs[doc_id]) for doc_id in indexed}
    got = [grades.get(doc_id, 0) for doc_id in found]
    ideal = sorted((g for g in grades.values() if g), reverse=True)
    relevant = sum(1 for g in grades.values() if g >= 2)
    ideal_dcg = dcg(ideal[:10])
    return {
        "ndcg10": dcg(got[:10]) / ideal_dcg if ideal_dcg else 0.0,
        "p5": sum(1 for g in got[:5] if g >= 2) / 5,
        "r20": sum(1 for g in got[:20] if g >= 2) / relevant if relevant else 0.0,
        "useless": float(not any(g >= 1 for g in got[:10])),
        "returned": float(len(found)),
    }


# --- loading through the pipeline ---------------------------------------------------------------------------
def run_pipeline_burst() -> float:
    started = time.monotonic()
    # One handler thread: a near-duplicate is enriched after its original has completed, as in real life.
    consumers = [ItemPublishConsumer]
    Supervisor(
        consumers, services=pipeline_services(consumers, housekeeping=False, burst=True), concurrency=1, burst=True
    ).run()
    return time.monotonic() - started


def load_corpus(docs: list[dict]) -> tuple[dict[int, str], dict[str, str], float]:
    tokens: dict[str, str] = {}
    for author in sorted({doc["author"] for doc in docs}):
        tokens[author] = agent_token_create(agent=agent_create(name=author)).token
    item_to_doc: dict[int, str] = {}
    seconds = 0.0
    originals = [doc for doc in docs if "duplicate_of" not in doc]
    duplicates = [doc for doc in docs if "duplicate_of" in doc]
    for wave in (originals, duplicates):
        item_to_doc.update(publish_wave(wave, tokens))
        seconds += run_pipeline_burst()
    return item_to_doc, tokens, seconds


# --- measurements -------------------------------------------------------------------------------------------
def embedding_cost(texts: list[str]) -> dict[str, float]:
    """Cost of the configured embedding on the corpus texts: first call (model load), then one text per call
    and batches of 32, in ms per item; process memory (RSS) before and after."""
    before = rss_mb()
    started = time.perf_counter()
    llm.embed([texts[0]])
    first_ms = (time.perf_counter() - started) * 1000
    loaded = rss_mb()
    started = time.perf_counter()
    for text in texts[:100]:
        llm.embed([text])
    single_ms = (time.perf_counter() - started) * 1000 / min(100, len(texts))
    started = time.perf_counter()
    for start in range(0, len(texts), 32):
        llm.embed(texts[start : start + 32])
    batch_ms = (time.perf_counter() - started) * 1000 / len(texts)
    return {
        "first_call_ms": first_ms,
        "ms_per_item_single": single_ms,
        "ms_per_item_batch32": batch_ms,
        "rss_before_mb": before,
        "rss_after_load_mb": loaded,
        "rss_after_corpus_mb": rss_mb(),
        "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def search(client: Client, q: str, mode: str) -> tuple[list[dict], float]:
    started = time.perf_counter()
    response = client.get("/api/v1/search", {"q": q, "mode": mode, "limit": DEPTH})
    elapsed = (time.perf_counter() - started) * 1000
    if response.status_code != 200:
        raise SystemExit(f"search {mode} {q!r} failed: {response.status_code} {response.content[:300]}")
    return response.json()["items"], elapsed


def grouping(docs: dict[str, dict], item_to_doc: dict[int, str]) -> dict[str, float]:
    """Near-duplicates that share their original's group, and items grouped with something that is not
    their labelled original or duplicate."""
    rows = {
        item_to_doc[pk]: group
        for pk, group in ProcessedItem.objects.filter(pk__in=item_to_doc, status="completed").values_list(
            "pk", "group_id"
        )
    }
    by_kind: dict[str, list[int]] = defaultdict(list)
    for doc in docs.values():
        if "duplicate_of" in doc and doc["id"] in rows and doc["duplicate_of"] in rows:
            by_kind[doc["duplicate_kind"]].append(int(rows[doc["id"]] == rows[doc["duplicate_of"]]))
    members: dict[int, list[str]] = defaultdict(list)
    for doc_id, group in rows.items():
        members[group].append(doc_id)
    wrong = 0
    for doc_id, group in rows.items():
        family = {doc_id, docs[doc_id].get("duplicate_of")} | {
            other for other, doc in docs.items() if doc.get("duplicate_of") == doc_id
        }
        wrong += any(other not in family for other in members[group])
    return {
        "edit_grouped": sum(by_kind["edit"]) / max(1, len(by_kind["edit"])),
        "edit_pairs": len(by_kind["edit"]),
        "paraphrase_grouped": sum(by_kind["paraphrase"]) / max(1, len(by_kind["paraphrase"])),
        "paraphrase_pairs": len(by_kind["paraphrase"]),
        "wrongly_grouped_items": wrong,
    }


def calibrate(client: Client, queries: list[dict], docs: dict[str, dict], item_to_doc, indexed) -> dict[str, list]:
    """Semantic search with no floor, then two sweeps over the returned similarities. The answer floor alone
    (SEARCH_MIN_SIMILARITY, no tail): nDCG@10, the nonsense queries that would still return something, the mean
    number of results. Then the tail floor (SEARCH_TAIL_SIMILARITY) below the model's answer floor: the same, with
    the cross-language nDCG@10 of the `across` row."""
    with_scores = []
    saved = settings.SEARCH_MIN_SIMILARITY, settings.SEARCH_TAIL_SIMILARITY
    settings.SEARCH_MIN_SIMILARITY = settings.SEARCH_TAIL_SIMILARITY = -1.0
    try:
        for query in queries:
            items, _ = search(client, query["q"], "semantic")
            with_scores.append((query, [(item_to_doc[int(i["item_id"])], i["score"]) for i in items]))
    finally:
        settings.SEARCH_MIN_SIMILARITY, settings.SEARCH_TAIL_SIMILARITY = saved
    answer_floor = semantic_floor() if saved[0] is None else float(saved[0])
    floors = [sweep_row(with_scores, docs, indexed, floor=step * 0.025, tail=step * 0.025) for step in range(33)]
    tails = [
        sweep_row(with_scores, docs, indexed, floor=answer_floor, tail=step * 0.025)
        for step in range(int(answer_floor / 0.025) + 1)
    ]
    return {"floors": floors, "tails": tails, "answer_floor": answer_floor}


def sweep_row(with_scores: list, docs: dict[str, dict], indexed: set[str], *, floor: float, tail: float) -> dict:
    """What semantic search would give with these floors: nothing unless the nearest reaches `floor`, then the
    results down to `tail`."""
    ndcgs, across, nonsense_hits, returned = [], [], 0, []
    for query, found in with_scores:
        answered = bool(found) and found[0][1] >= floor
        kept = [doc_id for doc_id, score in found if answered and score >= tail]
        if query.get("nonsense"):
            nonsense_hits += bool(kept)
            continue
        ndcgs.append(query_metrics(query, kept, docs, indexed)["ndcg10"])
        returned.append(len(kept))
        others = {doc_id for doc_id in indexed if docs[doc_id]["lang"] != query["lang"]}
        if any(grade(query, docs[doc_id]) >= 2 for doc_id in others):
            across.append(query_metrics(query, [doc_id for doc_id in kept if doc_id in others], docs, others)["ndcg10"])
    return {
        "floor": floor,
        "tail": tail,
        "ndcg10": statistics.mean(ndcgs),
        "across_ndcg10": statistics.mean(across) if across else float("nan"),
        "nonsense_with_results": nonsense_hits,
        "mean_results": statistics.mean(returned),
    }


def main() -> None:
    docs_list = load_jsonl("search_corpus.jsonl")
    docs = {doc["id"]: doc for doc in docs_list}
    queries = load_jsonl(ARGS.queries)
    real = [query for query in queries if not query.get("nonsense")]
    tune = tuning_half(real)
    nonsense = [query for query in queries if query.get("nonsense")]

    url = redis_url_with_db(settings.REDIS_URL, int(os.environ.get("BENCH_REDIS_DB", "12")))
    settings.REDIS_URL = url
    settings.RATE_LIMIT_PUBLISH_PER_MINUTE = 0
    settings.RATE_LIMIT_READ_PER_MINUTE = 0
    settings.RATE_LIMIT_SEARCH_EMBEDDINGS_PER_MINUTE = 0
    if ARGS.min_similarity is not None:
        settings.SEARCH_MIN_SIMILARITY = ARGS.min_similarity
    redis = get_redis(url)
    redis.flushdb()
    connection.settings_dict["TEST"]["NAME"] = SCRATCH_DB
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=False, serialize=False)
    results: dict = {"embedding": getattr(settings, "LOCAL_EMBEDDING", "hashing")}
    try:
        results["embedding_cost"] = embedding_cost([doc["content"] for doc in docs_list])
        item_to_doc, tokens, load_seconds = load_corpus(docs_list)
        completed = set(
            ProcessedItem.objects.filter(pk__in=item_to_doc, status="completed").values_list("pk", flat=True)
        )
        indexed = {item_to_doc[pk] for pk in completed}
        statuses = {"completed": len(completed), "not completed": len(item_to_doc) - len(completed)}
        results["load"] = {"seconds": load_seconds, **statuses}
        client = Client(HTTP_AUTHORIZATION=f"Bearer {next(iter(tokens.values()))}")

        per: dict[tuple[str, str], list[dict]] = defaultdict(list)
        latency: dict[str, list[float]] = defaultdict(list)
        nonsense_hits: dict[str, int] = defaultdict(int)
        for mode in MODES:
            for query in real:
                items, ms = search(client, query["q"], mode)
                latency[mode].append(ms)
                found = [item_to_doc[int(item["item_id"])] for item in items]
                metrics = query_metrics(query, found, docs, indexed)
                per[(mode, query["lang"])].append(metrics)
                per[(mode, "all")].append(metrics)
                half = "tune" if query["id"] in tune else "held-out"
                per[(mode, f"{query['lang']}/{half}")].append(metrics)
                per[(mode, f"all/{half}")].append(metrics)
                results.setdefault("per_query", {}).setdefault(query["id"], {})[mode] = round(metrics["ndcg10"], 3)
                # Across languages: as if the query's own language had no answer, for queries with a relevant answer
                # in another language: its documents left out of the ideal ranking and of the 20 results fetched
                # (the search is not run again, so the places they held stay empty: a lower bound).
                others = {doc_id for doc_id in indexed if docs[doc_id]["lang"] != query["lang"]}
                if any(grade(query, docs[doc_id]) >= 2 for doc_id in others):
                    crossed = query_metrics(query, [doc_id for doc_id in found if doc_id in others], docs, others)
                    per[(mode, "across")].append(crossed)
                    per[(mode, f"across/{half}")].append(crossed)
                if ARGS.show and query["lang"] == ARGS.show and (query["id"] in tune or ARGS.show_held_out):
                    shown = " ".join(f"{doc_id}:{grade(query, docs[doc_id])}" for doc_id in found[:10])
                    print(f"{mode:<9}{query['id']:<16}{metrics['ndcg10']:.2f}  {query['q']}  -> {shown}")
            for query in nonsense:
                items, _ = search(client, query["q"], mode)
                nonsense_hits[mode] += bool(items)
        table = {}
        for (mode, lang), rows in per.items():
            table[f"{mode}/{lang}"] = {
                key: statistics.mean(row[key] for row in rows) for key in ("ndcg10", "p5", "r20", "useless", "returned")
            } | {"queries": len(rows)}
        results["quality"] = table
        results["nonsense_with_results"] = {mode: nonsense_hits[mode] for mode in MODES}
        results["nonsense_queries"] = len(nonsense)
        results["search_ms_mean"] = {mode: statistics.mean(latency[mode]) for mode in MODES}
        results["grouping"] = grouping(docs, item_to_doc)
        if ARGS.calibrate:
            results["calibration"] = calibrate(client, queries, docs, item_to_doc, indexed)
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)
        redis.flushdb()
    report(results)
    if ARGS.json:
        ARGS.json.write_text(json.dumps(results, indent=2))


def report(results: dict) -> None:
    cost = results["embedding_cost"]
    load = results["load"]
    print(
        f"\nSearch quality on bench/data ({load['completed']} of {load['completed'] + load['not completed']} "
        f"broadcasts completed by the local analyzer in {load['seconds']:.1f} s); embedding: {results['embedding']}"
    )
    print(f"{'mode':<9}{'lang':<7}{'queries':>8}{'nDCG@10':>9}{'P@5':>7}{'R@20':>7}{'useless':>9}{'results':>9}")
    print("-" * 65)
    for mode in MODES:
        for lang in (*LANGS, "all", "across"):
            row = results["quality"].get(f"{mode}/{lang}")  # the split halves are in the table below
            if row:
                print(
                    f"{mode:<9}{lang:<7}{row['queries']:>8}{row['ndcg10']:>9.3f}{row['p5']:>7.3f}{row['r20']:>7.3f}"
                    f"{row['useless']:>9.0%}{row['returned']:>9.1f}"
                )
    print("useless: share of queries whose top 10 is empty or holds nothing of grade >= 1; results: mean count")
    print("across: each query with a relevant answer in another language, its own language's results dropped (top 20)")
    print(f"\nnDCG@10 on the tuning half / the held-out half of the queries (seed {SPLIT_SEED}) / all")
    print(f"{'mode':<9}" + "".join(f"{lang:>24}" for lang in (*LANGS, "all", "across")))
    for mode in MODES:
        cells = []
        for lang in (*LANGS, "all", "across"):
            values = [
                results["quality"].get(f"{mode}/{key}", {}).get("ndcg10")
                for key in (f"{lang}/tune", f"{lang}/held-out", lang)
            ]
            cells.append(" / ".join("-" if value is None else f"{value:.3f}" for value in values))
        print(f"{mode:<9}" + "".join(f"{cell:>24}" for cell in cells))
    hits = results["nonsense_with_results"]
    print(
        f"nonsense queries returning anything (of {results['nonsense_queries']}): "
        + ", ".join(f"{mode} {hits[mode]}" for mode in MODES)
    )
    print(
        "mean search request time (ms, in-process client): "
        + ", ".join(f"{mode} {ms:.1f}" for mode, ms in results["search_ms_mean"].items())
    )
    group = results["grouping"]
    print(
        f"near-duplicates grouped with their original: edits {group['edit_grouped']:.0%} of {group['edit_pairs']}, "
        f"paraphrases {group['paraphrase_grouped']:.0%} of {group['paraphrase_pairs']}; "
        f"items grouped with an unrelated item: {group['wrongly_grouped_items']}"
    )
    print(
        f"embedding cost: first call {cost['first_call_ms']:.0f} ms, {cost['ms_per_item_single']:.2f} ms/item one at "
        f"a time, {cost['ms_per_item_batch32']:.2f} ms/item in batches of 32; RSS {cost['rss_before_mb']:.0f} MB -> "
        f"{cost['rss_after_load_mb']:.0f} MB after the first call -> {cost['rss_after_corpus_mb']:.0f} MB "
        f"(peak {cost['max_rss_mb']:.0f} MB)"
    )
    if "calibration" in results:
        calibration = results["calibration"]
        print("\nsemantic floor sweep (SEARCH_MIN_SIMILARITY, one floor)")
        print_sweep("floor", calibration["floors"])
        print(f"\ntail floor sweep (SEARCH_TAIL_SIMILARITY, the answer floor at {calibration['answer_floor']:.3f})")
        print_sweep("tail", calibration["tails"])


def print_sweep(column: str, rows: list[dict]) -> None:
    print(f"{column:>7}{'nDCG@10':>9}{'across':>8}{'nonsense':>10}{'results':>9}")
    for row in rows:
        print(
            f"{row[column]:>7.3f}{row['ndcg10']:>9.3f}{row['across_ndcg10']:>8.3f}"
            f"{row['nonsense_with_results']:>10}{row['mean_results']:>9.1f}"
        )


if __name__ == "__main__":
    main()
