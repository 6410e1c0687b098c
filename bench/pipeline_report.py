"""The tables bench/pipeline_throughput.py prints: its runs' medians beside the floor's, and where each run's slot
time went (bench/pipeline_timeline.py)."""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING

from bench.pipeline_timeline import HEADER, row

if TYPE_CHECKING:
    from bench.pipeline_floor import Plan
    from bench.pipeline_throughput import Config, Result

CALLS_PER_ITEM = 4  # embedding, safety, extraction, suggestion


def print_table(results: dict[Config, list[Result]], plan: Plan | None, args, pool: int) -> None:
    print(
        f"\nEnrichment throughput, fake model latency per call as in C ({CALLS_PER_ITEM} calls per "
        f"item), median of {args.rounds}; pool max {pool} connections per process"
    )
    if plan is not None:
        print(
            f"Per item (the handler's own, captured): {plan.transactions} transactions, {plan.statements} SQL "
            f"statements, {plan.requests} HTTP requests; the floor replays exactly these (bench/pipeline_floor.py)"
        )
    header = (
        "| C | items | items/s | ideal | ratio | CPU ms/item (proc + PG) | floor CPU ms/item (proc + PG) "
        "| x floor (proc, PG) | xact/item | Redis cmds/item | peak RSS MB | threads | DB conns | load |"
    )
    print(header)
    print("|---" * (header.count("|") - 1) + "|")
    for config, runs in results.items():

        def med(attr: str, runs=runs) -> float:
            return statistics.median(getattr(run, attr) for run in runs)

        floors = [run.floor for run in runs if run.floor is not None]
        floor_cells = "| |"
        if floors:
            f_proc = statistics.median(f.cpu_process for f in floors)
            f_pg = statistics.median(f.cpu_postgres for f in floors)
            floor_cells = (
                f"{f_proc * 1000:.1f} + {f_pg * 1000:.1f} | "
                f"{med('cpu_process') / f_proc:.2f}, {med('cpu_postgres') / f_pg:.2f} |"
            )
        ideal = "offline | -" if args.local else f"{runs[0].ideal:.0f} | {med('ratio'):.2f}"
        label = f"{config.label.split(' @')[0]} offline" if args.local else config.label
        print(
            f"| {label} | {runs[0].items} | {med('rate'):.1f} | {ideal} | "
            f"{med('cpu_process') * 1000:.1f} + {med('cpu_postgres') * 1000:.1f} | {floor_cells} "
            f"{med('transactions'):.1f} | {med('redis_commands'):.1f} | "
            f"{med('rss_mb'):.0f} | {med('threads'):.0f} | {med('connections'):.0f} | {med('load'):.1f} |"
        )


def print_timelines(results: dict[Config, list[Result]]) -> None:
    """Where the slot time went, per run (bench/pipeline_timeline.py); the whole run's ratio beside the
    steady state's, never instead of it."""
    print("\nWhere the slot time went, per run (bench/pipeline_timeline.py)")
    print(HEADER)
    print("|---" * (HEADER.count("|") - 1) + "|")
    for config, runs in results.items():
        for k, run in enumerate(runs):
            if run.timeline is not None:
                print(row(f"{config.label} #{k + 1}", run.ratio, run.ideal, run.timeline))
