"""What handing a model call to the model loop and its outcome back to a handler thread costs (pipeline.llm.aio).

T threads each make calls one after another, as enrichment handlers do, each call a coroutine that only sleeps
--latency on the model loop (no HTTP: the hand-off alone), with a lease's cancel event subscribed as in a
handler. Two ways alternate run by run: `pipeline.llm.aio.run` (asyncio.run_coroutine_threadsafe and its
concurrent.futures.Future: a Condition, a waiter lock per wait, two chained futures per call) and a leaner
one tried as its replacement (`lock_run`: a task whose end releases one plain lock the thread blocks on; no
cancellation, which a replacement would have to add). Printed: this process's CPU per call (all threads),
median of --rounds.

    flock /tmp/eigenflux-bench.lock .venv/bin/python bench/model_handoff.py [--threads 32] [--calls 200]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pipeline.llm import aio  # noqa: E402
from pipeline.runtime.event import Lease  # noqa: E402


def lock_run(make, cancel):
    """The leaner hand-off: a task on the loop, its end releasing a lock the thread blocks on."""
    del cancel  # not wired: this measures the hand-off alone
    loop, ready, box = aio.event_loop(), threading.Lock(), []
    ready.acquire()

    def start() -> None:
        task = loop.create_task(aio._awaited(make))
        task.add_done_callback(lambda done: (box.append(done.result()), ready.release()))

    loop.call_soon_threadsafe(start)
    ready.acquire()
    return box[0]


def one_run(way, threads: int, calls: int, latency: float) -> float:
    """CPU seconds of this process per call, `threads` threads making `calls` calls each."""

    async def call() -> int:
        await asyncio.sleep(latency)
        return 1

    def worker() -> None:
        cancel = Lease().cancelled
        for _ in range(calls):
            way(call, cancel)

    workers = [threading.Thread(target=worker) for _ in range(threads)]
    before = time.process_time()
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join()
    return (time.process_time() - before) / (threads * calls)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=32)
    parser.add_argument("--calls", type=int, default=200, help="per thread and run")
    parser.add_argument("--latency", type=float, default=0.005, help="seconds each call sleeps on the loop")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    ways = {"pipeline.llm.aio.run (run_coroutine_threadsafe + Future)": aio.run, "a task + one lock": lock_run}
    one_run(aio.run, args.threads, 10, args.latency)  # the loop exists, warm
    results: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(args.rounds):
        for name, way in ways.items():
            results[name].append(one_run(way, args.threads, args.calls, args.latency))
    load = os.getloadavg()[0]
    print(f"\n{args.threads} threads x {args.calls} calls per run, median of {args.rounds}, load {load:.1f}")
    print("| hand-off | CPU µs per call (process) |")
    print("|---|---|")
    for name, runs in results.items():
        print(f"| {name} | {statistics.median(runs) * 1e6:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
