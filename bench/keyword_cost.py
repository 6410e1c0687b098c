"""What keyword search's candidate query costs on a seeded network: `items.keyword_search.keyword_candidates` (the
keyword bar, the newest matches and their ranking; no HTTP, no JSON) for every query of a set with no filter, a type
filter and a domain filter, the best of --calls calls each, and by which path the newest matches were found (the
window of the newest items, the text index over the whole network, or the budget).

With --budget they are also measured with no SEARCH_KEYWORD_BUDGET_MS, the text index path always run to its end,
and the answers compared: how many the budget changed, and how much of each changed answer it kept.

With --plain the same queries are also measured the way the match was written before 7 December 2026: every
lexicon alternative of a concept (the ones containing another too) and "at least k of n concepts" as an OR of every
k-concept conjunction. The two forms take turns on each query and filter, both with no budget (so that only the form
differs); their answers are compared, and the table says whether every one was the same. One comparison at a time.

    flock /tmp/eigenflux-bench.lock .venv/bin/python bench/keyword_cost.py [--seeded 1M] [--plain] [--budget]
        [--queries search_queries_independent.jsonl]

The network is bench/seed.py's of that scale; the 10k one (the default) is seeded first when it is missing, a
larger one must be seeded by hand (`bench/seed.py --scale 1M`, about 20 minutes).
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.scratch import offline_django  # noqa: E402

FILTERS = {"none": {}, "type=supply": {"broadcast_type": "supply"}, "domain=compute": {"domain": "compute"}}


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeded", choices=("10k", "100k", "1M"), default="10k")
    parser.add_argument(
        "--queries", default="search_queries.jsonl", help="a query file of bench/data (search_latency's set by default)"
    )
    parser.add_argument("--calls", type=int, default=3, help="calls per query and filter; the best one counts")
    parser.add_argument("--plain", action="store_true", help="also measure the match as it was written before")
    parser.add_argument(
        "--budget",
        action="store_true",
        help="also measure with no SEARCH_KEYWORD_BUDGET_MS (the text index path runs whole)",
    )
    return parser.parse_args()


def _plain_at_least(needed: int, concepts: list[str]) -> str:
    return " | ".join("(" + " & ".join(group) + ")" for group in itertools.combinations(concepts, needed))


# How items.textsearch builds the match, by name: as built, or as before (every alternative; k of n as an OR of
# every k-concept conjunction).
FORMS = {
    "as built": {},
    "plain": {"_without_longer_phrases": lambda parts: parts, "_at_least": _plain_at_least},
    "no budget": {},
}
# Settings a form runs with, besides the module's attributes above.
FORM_SETTINGS = {"no budget": {"SEARCH_KEYWORD_BUDGET_MS": 0}}


class Form:
    """items.textsearch building the match in one of FORMS while in the block."""

    def __init__(self, name: str) -> None:
        from django.test.utils import override_settings

        from items import textsearch

        self.module, self.replaced = textsearch, FORMS[name]
        self.kept = {attribute: getattr(textsearch, attribute) for attribute in self.replaced}
        self.settings = override_settings(**FORM_SETTINGS.get(name, {}))

    def __enter__(self) -> None:
        for attribute, value in self.replaced.items():
            setattr(self.module, attribute, value)
        self.settings.enable()

    def __exit__(self, *exc) -> None:
        self.settings.disable()
        for attribute, value in self.kept.items():
            setattr(self.module, attribute, value)


Result = tuple[dict[str, list[float]], dict[str, Counter], dict[tuple, list]]


def measure(queries: list[str], calls: int, forms: list[str]) -> dict[str, Result]:
    """Each form's times per filter, paths taken and answers; the forms take turns on each query and filter."""
    from items.keyword_search import KEYWORD_CANDIDATE_PATHS, keyword_candidates

    def paths() -> dict[str, float]:  # the counter itself, not every metric of the process's registry
        samples = KEYWORD_CANDIDATE_PATHS.collect()[0].samples
        return {sample.labels["path"]: sample.value for sample in samples if sample.name.endswith("_total")}

    results: dict[str, Result] = {
        form: ({name: [] for name in FILTERS}, {name: Counter() for name in FILTERS}, {}) for form in forms
    }
    for q in queries:
        for name, filters in FILTERS.items():
            for form in forms:
                times, taken, answers = results[form]
                best = float("inf")
                with Form(form):
                    for call in range(calls):
                        before = paths()
                        started = time.perf_counter()
                        answer = keyword_candidates(
                            q=q, depth=21, **{"broadcast_type": None, "domain": None, **filters}
                        )
                        best = min(best, (time.perf_counter() - started) * 1000)
                        if call == 0:
                            after = paths()
                            taken[name].update(path for path in after if after[path] != before.get(path, 0))
                times[name].append(best)
                answers[(q, name)] = answer
    return results


def row(label: str, name: str, values: list[float], taken: Counter) -> str:
    ordered = sorted(values)
    count = len(ordered)
    cells = [
        statistics.mean(ordered),
        ordered[count // 2],
        ordered[min(count - 1, int(count * 0.9))],
        ordered[min(count - 1, int(count * 0.99))],
        ordered[-1],
    ]
    paths = ", ".join(f"{path} {n}" for path, n in sorted(taken.items()))
    return f"| {label:<8} | {name:<15} | " + " | ".join(f"{cell:7.1f}" for cell in cells) + f" | {paths} |"


def main() -> None:
    args = arguments()
    offline_django()
    import psycopg
    from django.conf import settings

    from bench.seed import database_name, use_seeded

    # Asked on a connection of its own: Django's pool, once connected, would keep serving the configured database.
    with psycopg.connect(settings.DATABASE_URL, autocommit=True) as conn:
        found = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [database_name(args.seeded)]).fetchone()
    missing = found is None
    if missing and args.seeded != "10k":
        raise SystemExit(f"no seeded {args.seeded} network: run bench/seed.py --scale {args.seeded} first")
    if missing:
        subprocess.run([sys.executable, str(ROOT / "bench" / "seed.py"), "--scale", "10k"], check=True)
    use_seeded(args.seeded)
    path = ROOT / "bench" / "data" / args.queries
    queries = [json.loads(line)["q"] for line in path.open(encoding="utf-8")]
    if args.queries == "search_queries.jsonl":
        from bench.search_latency import EXTRA_QUERIES

        queries += EXTRA_QUERIES
    from items.models import ProcessedItem

    items = ProcessedItem.objects.count()
    if args.plain and args.budget:
        raise SystemExit("one comparison at a time: --plain or --budget")
    if args.plain:
        settings.SEARCH_KEYWORD_BUDGET_MS = 0
    forms = ["as built"] + ["plain"] * args.plain + ["no budget"] * args.budget
    runs = list(measure(queries, args.calls, forms).items())
    print(
        f"\nkeyword_candidates at {items:,} items ({args.seeded} network), {len(queries)} queries of {args.queries}, "
        f"best of {args.calls} calls each, ms\n"
    )
    print("| match    | filter          |    mean |  median |     p90 |     p99 |     max | path (queries) |")
    print("|----------|-----------------|---------|---------|---------|---------|---------|----------------|")
    for label, (times, taken, _answers) in runs:
        for name in FILTERS:
            print(row(label, name, times[name], taken[name]))
        print(row(label, "all", [t for values in times.values() for t in values], sum(taken.values(), Counter())))
    built = runs[0][1][2]
    for label, (_times, _taken, other) in runs[1:]:
        differ = [key for key in built if built[key].ranked != other[key].ranked]
        print(f"\nthe same answer (ids and scores) as built and {label}: {len(built) - len(differ)} of {len(built)}")
        if differ:
            kept = [
                len({pk for pk, _ in built[key].ranked[:20]} & {pk for pk, _ in other[key].ranked[:20]})
                / max(1, len(other[key].ranked[:20]))
                for key in differ
            ]
            print(
                f"  of {label}'s first 20 ids, kept as built: mean {statistics.mean(kept):.2f}, least {min(kept):.2f}"
            )
        for q, name in differ[:10]:
            print(f"  differs: {name} {q} ({len(built[q, name].ranked)} against {len(other[q, name].ranked)})")


if __name__ == "__main__":
    main()
