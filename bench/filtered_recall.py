"""Filtered semantic search against exact search, on a network bench/seed.py wrote: for filters by type, domain,
language and time window whose shares of the visible items run from 0.1 % to 30 %, the recall@20 of the
application's path (items.semantic_search.semantic_candidates: an HNSW walk or an exact search, as it plans)
against an exact search of the same filtered rows (no HNSW index), at the search's similarity floor and with no
floor (the feed's use), and the path's wall time and PostgreSQL backend CPU per query. `--baseline FILE` also
measures another version of the module (e.g. `git show <commit>:items/semantic_search.py > /tmp/old.py`), for
the filters its semantic_candidates takes.

    flock /tmp/eigenflux-bench.lock .venv/bin/python bench/hnsw_recall.py --filtered 100k [--queries 80]
        [--factor 3] [--baseline /tmp/old.py] [--only type=,domain=tag]

Run bench/seed.py --scale 100k first (its database is read, not changed).
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import os
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DEPTH = 20
TYPES = ("info", "supply", "alert")
DOMAINS = ("compute", "marketing", "tag-30", "tag-10", "tag-3", "tag-1", "tag-0.3", "tag-0.1")
LANGS = ("ja", "de", "fr", "es", "ko")
WINDOW_DAYS = (110, 36.5, 11, 3.65, 1.1, 0.365)


def filters() -> list[tuple[str, dict]]:
    from django.utils import timezone

    now = timezone.now()
    chosen = [(f"type={kind}", {"broadcast_type": kind}) for kind in TYPES]
    chosen += [(f"domain={domain}", {"domain": domain}) for domain in DOMAINS]
    chosen += [(f"lang={lang}", {"lang": lang}) for lang in LANGS]
    chosen += [(f"last {days:g} days", {"since": now - timedelta(days=days)}) for days in WINDOW_DAYS]
    chosen += [
        ("type=supply, lang=ja", {"broadcast_type": "supply", "lang": "ja"}),
        ("domain=compute, last 36.5 days", {"domain": "compute", "since": now - timedelta(days=36.5)}),
    ]
    return chosen


def query_vectors(count: int) -> list[list[float]]:
    from pipeline.llm import embed

    texts: list[str] = []
    for name in ("search_queries.jsonl", "search_queries_independent.jsonl"):
        for line in (ROOT / "bench" / "data" / name).open(encoding="utf-8"):
            if line.strip() and (text := json.loads(line)["q"]) not in texts:
                texts.append(text)
    return embed(texts[:count]).value


def backend_cpu_ns() -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])


def exact(vector: list[float], params: dict, floor: float) -> list[int]:
    from django.db import transaction

    from items.semantic_search import SemanticFilters, _exact

    with transaction.atomic():
        return [pk for pk, _ in _exact(vector, SemanticFilters(**params), DEPTH, floor)]


def share(params: dict) -> float:
    from items.selectors import visible_items
    from items.semantic_search import SemanticFilters

    return SemanticFilters(**params).queryset().count() / max(1, visible_items(None, None).count())


def paths_taken() -> dict[str, float]:
    from items.semantic_search import SEMANTIC_PATHS

    return {
        sample.labels["path"]: sample.value
        for sample in SEMANTIC_PATHS.collect()[0].samples
        if sample.name.endswith("_total")
    }


def measure(search, vectors: list[list[float]], params: dict, floor: float) -> dict:
    """Recall@20 at the floor and with none, wall ms per query, backend CPU ms per query, paths taken."""
    found: dict[float, list[float]] = {floor: [], -1.0: []}
    walls, cpu = [], 0
    before = paths_taken()
    for vector in vectors:
        for bar in found:
            truth = set(exact(vector, params, bar))
            start_cpu, started = backend_cpu_ns(), time.perf_counter()
            got = {pk for pk, _ in search(embedding=vector, min_similarity=bar, depth=DEPTH, **params)}
            walls.append((time.perf_counter() - started) * 1000)
            cpu += backend_cpu_ns() - start_cpu
            if truth:
                found[bar].append(len(got & truth) / len(truth))
    after = paths_taken()
    taken = {path: after[path] - before.get(path, 0) for path in after if after[path] > before.get(path, 0)}
    return {
        "recall": {bar: statistics.mean(values) if values else float("nan") for bar, values in found.items()},
        "p50": statistics.median(walls),
        "p99": sorted(walls)[min(len(walls) - 1, int(0.99 * len(walls)))],
        "cpu": cpu / 1e6 / len(walls),
        "paths": ", ".join(f"{path} {count:.0f}" for path, count in sorted(taken.items())),
    }


def baseline_search(path: str):
    """semantic_candidates of another version of the module, its metrics kept out of the process's registry."""
    import prometheus_client

    spec = importlib.util.spec_from_file_location("baseline_search", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["baseline_search"] = module
    counter = prometheus_client.Counter
    prometheus_client.Counter = lambda *args, **kwargs: counter(*args, registry=None, **kwargs)
    try:
        spec.loader.exec_module(module)  # type: ignore[union-attr]
    finally:
        prometheus_client.Counter = counter
    return module.semantic_candidates


def run(scale: str, queries: int, factor: float | None, baseline: str, only: str = "") -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "eigenflux.settings")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    import django

    django.setup()

    from bench.seed import use_seeded
    from items import semantic_search
    from items.models import ProcessedItem
    from pipeline.llm.embeddings import semantic_floor

    use_seeded(scale)
    if factor is not None:
        semantic_search.FILTER_EF_FACTOR = factor
    old = baseline_search(baseline) if baseline else None
    floor, vectors = semantic_floor(), query_vectors(queries)
    items = ProcessedItem.objects.count()
    print(f"{items:,} items; {len(vectors)} queries; recall@{DEPTH} against exact search of the same filtered rows, "
          f"at the floor {floor} and with no floor; FILTER_EF_FACTOR {semantic_search.FILTER_EF_FACTOR}; "
          f"load average {os.getloadavg()[0]:.1f}", flush=True)  # fmt: skip
    print("\n| filter | share of visible items | recall@20 (floor / none) | paths | ms p50 / p99 | backend CPU ms"
          + (" | baseline recall@20 (floor / none) | baseline ms p50 / p99 |" if old else " |"))  # fmt: skip
    print("|---|---|---|---|---|---|" + ("---|---|" if old else ""))
    for label, chosen in filters():
        if only and not label.startswith(tuple(only.split(","))):
            continue
        params = {"broadcast_type": None, "domain": None, **chosen}
        got = measure(semantic_search.semantic_candidates, vectors, params, floor)
        line = (f"| {label} | {share(chosen):.2%} | {got['recall'][floor]:.3f} / {got['recall'][-1.0]:.3f} "
                f"| {got['paths']} | {got['p50']:.1f} / {got['p99']:.1f} | {got['cpu']:.1f} |")  # fmt: skip
        if old and set(chosen) <= set(inspect.signature(old).parameters):
            was = measure(old, vectors, params, floor)
            line += f" {was['recall'][floor]:.3f} / {was['recall'][-1.0]:.3f} | {was['p50']:.1f} / {was['p99']:.1f} |"
        elif old:
            line += " (no such filter) | |"
        print(line, flush=True)
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
