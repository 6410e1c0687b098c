"""A fresh set through the real pipeline: every broadcast published through the agent API (each by its own agent),
relayed and enriched by `cg:item:publish` with the offline analyzer, then read back as the item's status. Prints
the fresh-set tables (bench/fresh_set.py) from what the pipeline decided, and how often that agrees with the
decision function the fresh-set and review-queue benches use (`bench.review_queue.outcome`), which judges each text
alone: the pipeline also runs the blacklist and the exact and semantic duplicate checks over what came before, so
a near-twin may end as a duplicate. Disagreements are printed as counts only.

Uses a scratch database on the embedded (or DATABASE_URL) PostgreSQL, dropped at the end, and a dedicated Redis db
(BENCH_REDIS_DB, default 12) that it flushes before and after. A set given as --fresh4 (etc.) is the same set the
analyzer bench reads; a test set (--fresh5, --fresh6) is spent by running it here as much as there.

    flock /tmp/eigenflux-bench.lock .venv/bin/python bench/fresh_pipeline.py --fresh4
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SCRATCH_DB = "bench_eigenflux_fresh_pipeline"


def parse_args() -> argparse.Namespace:
    from bench import fresh_set

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    fresh_set.add_flags(parser)
    args = parser.parse_args()
    if args.fresh_set is None:
        parser.error("name a set: --fresh, --fresh2, --fresh3, --fresh4, --fresh5 or --fresh6")
    return args


# What an item's status means to a reader, in the fresh set's words.
SEEN_AS = {"completed": "published", "review": "held", "discarded": "discarded"}


def pipeline_decisions(texts: list[str]) -> dict[str, tuple[str, str]]:
    """text -> (published | held | discarded | <other status>, the stage): publish each through the API, run the
    pipeline until it is idle, read the statuses back."""
    from bench.corpus_publish import publish_wave
    from items.models import ModerationDecision, ProcessedItem
    from items.services.agents import agent_create, agent_token_create
    from pipeline.consumers.item_publish import ItemPublishConsumer
    from pipeline.runtime.supervisor import Supervisor
    from pipeline.services import pipeline_services

    docs = [{"id": str(n), "author": f"fresh-author-{n}", "content": text} for n, text in enumerate(texts)]
    tokens = {doc["author"]: agent_token_create(agent=agent_create(name=doc["author"])).token for doc in docs}
    item_to_doc = publish_wave(docs, tokens)
    consumers = [ItemPublishConsumer]
    Supervisor(consumers, services=pipeline_services(consumers, housekeeping=False, burst=True), burst=True).run()
    # The deciding stage: the item's last decision that was not a pass ("safety:weapons", "review:safety_risk").
    last: dict[int, str] = {}
    decisions = ModerationDecision.objects.filter(item_id__in=item_to_doc).exclude(verdict="pass")
    for item_id, stage, category in decisions.order_by("created_at", "pk").values_list("item_id", "stage", "category"):
        last[item_id] = f"{stage}:{category}" if category else stage
    decided: dict[str, tuple[str, str]] = {}
    for item in ProcessedItem.objects.filter(raw_id__in=item_to_doc).select_related("raw"):
        stage = "" if item.status == "completed" else last.get(item.pk, item.reason)
        decided[item.raw.content] = (SEEN_AS.get(item.status, item.status), stage)
    return decided


def agreement(texts: list[str], decided: dict[str, tuple[str, str]]) -> None:
    from bench.review_queue import outcome

    differ: Counter[tuple[str, str]] = Counter()
    for text in texts:
        alone, _ = outcome(text)
        got, stage = decided.get(text, ("missing", ""))
        if got != alone:
            differ[(alone, f"{got} {stage}".strip())] += 1
    same = len(texts) - sum(differ.values())
    print(f"\n  the pipeline agrees with the decision alone (bench.review_queue.outcome) on {same} of {len(texts)}")
    for (alone, got), count in sorted(differ.items()):
        print(f"  alone {alone:<10} -> pipeline {got}: {count}")


def main() -> None:
    args = parse_args()
    from bench.scratch import offline_django

    offline_django()
    from bench import fresh_set
    from bench.scratch import scratch_test_db

    cases = fresh_set.load_fresh(args.fresh_set)
    texts = [case["text"] for case in cases]
    with scratch_test_db(SCRATCH_DB, 12):
        decided = pipeline_decisions(texts)
    print(f"Through the pipeline (publish API, relay, cg:item:publish, offline analyzer): {args.fresh_set.name}")
    fresh_set.fresh_section(lambda text: decided.get(text, ("missing", "")), args.fresh_set)
    agreement(texts, decided)


if __name__ == "__main__":
    main()
