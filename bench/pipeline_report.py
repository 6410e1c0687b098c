"""The tables bench/pipeline_throughput.py prints: its runs' medians beside the floor's, and where each run's slot
time went (bench/pipeline_timeline.py)."""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING

from bench.pipeline_timeline import HEADER, row

if TYPE_CHECKING:
    from bench.pipeline_floor import FloorResult, Plan
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
    sdk = any(run.sdk_floor is not None for runs in results.values() for run in runs)
    header = (
        "| C | items | items/s | ideal | ratio | CPU ms/item (proc + PG) | floor CPU ms/item (proc + PG) "
        "| x floor (proc, PG) | floor's ratio |"
        + (" floor with the SDK, CPU ms/item (proc + PG) | x floor with the SDK (proc) |" if sdk else "")
        + " xact/item | Redis cmds/item | peak RSS MB | threads | DB conns | load |"
    )
    print(header)
    print("|---" * (header.count("|") - 1) + "|")
    for config, runs in results.items():

        def med(attr: str, runs=runs) -> float:
            return statistics.median(getattr(run, attr) for run in runs)

        floor_cells = _floor_cells([run.floor for run in runs if run.floor is not None], runs, ratio=True)
        if sdk:
            floor_cells += " " + _floor_cells([run.sdk_floor for run in runs if run.sdk_floor is not None], runs)
        ideal = "offline | -" if args.local else f"{runs[0].ideal:.0f} | {med('ratio'):.2f}"
        label = f"{config.label.split(' @')[0]} offline" if args.local else config.label
        print(
            f"| {label} | {runs[0].items} | {med('rate'):.1f} | {ideal} | "
            f"{med('cpu_process') * 1000:.1f} + {med('cpu_postgres') * 1000:.1f} | {floor_cells} "
            f"{med('transactions'):.1f} | {med('redis_commands'):.1f} | "
            f"{med('rss_mb'):.0f} | {med('threads'):.0f} | {med('connections'):.0f} | {med('load'):.1f} |"
        )


def _floor_cells(floors: list[FloorResult], runs: list[Result], *, ratio: bool = False) -> str:
    """A floor's medians (proc + PG), the runs' CPU as multiples of them, and (`ratio`) the floor's own ratio of
    ideal: what the plan's work reaches in this configuration on this machine, with no ORM, SDK or runtime."""
    if not floors:
        return "| | |" if ratio else "| |"
    f_proc = statistics.median(f.cpu_process for f in floors)
    f_pg = statistics.median(f.cpu_postgres for f in floors)
    proc = statistics.median(run.cpu_process for run in runs)
    cells = f"{f_proc * 1000:.1f} + {f_pg * 1000:.1f} | "
    if not ratio:
        return cells + f"{proc / f_proc:.2f} |"
    pg = statistics.median(run.cpu_postgres for run in runs)
    floor_ratio = statistics.median(f.rate for f in floors) / runs[0].ideal
    return cells + f"{proc / f_proc:.2f}, {pg / f_pg:.2f} | {floor_ratio:.2f} |"


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
