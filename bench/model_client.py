"""What a model request costs this process, per HTTP transport of the openai SDK (LLM_HTTP_CLIENT).

The fake OpenAI-compatible server (tests/fakes) runs in a process of its own and answers every request after
--latency seconds; this process keeps C requests in flight on one event loop through the client the pipeline
uses (pipeline.llm.clients.openai_client), for --seconds per run, and measures the client side only: requests
per second against the ideal C / latency, latency p50/p99, and this process's CPU per request. Transports
alternate run by run; the table shows the median of --rounds runs.

    flock /tmp/eigenflux-bench.lock .venv/bin/python bench/model_client.py [--concurrency 32,64,256] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "eigenflux.settings")
os.environ.setdefault("LOG_LEVEL", "WARNING")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402

from pipeline.llm import aio, clients  # noqa: E402
from pipeline.llm.clients import ClientConfig  # noqa: E402

TRANSPORTS = ("aiohttp", "httpx")
SERVER = """
import sys, time
sys.path.insert(0, {root!r})
from tests.fakes.openai_server import FakeOpenAIServer
server = FakeOpenAIServer().start()
server.latency = {latency!r}
print(server.url, flush=True)
time.sleep(86400)
"""


def run(url: str, transport: str, concurrency: int, seconds: float) -> tuple[float, float, float, float]:
    settings.LLM_HTTP_CLIENT = transport
    config = ClientConfig("main", url, "sk-bench", "fake-main", 30.0, 0, "responses", "", True)
    client = clients.openai_client(config)
    latencies: list[float] = []

    async def worker(n: int) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            started = time.monotonic()
            raw = await client.responses.with_raw_response.create(
                model="fake-main", input=f"TASK: process_item {n} {started} " * 40, max_output_tokens=300
            )
            await raw.http_response.aread()
            latencies.append(time.monotonic() - started)

    async def all_workers() -> float:
        before = os.times()
        await asyncio.gather(*(worker(n) for n in range(concurrency)))
        after = os.times()
        return (after.user + after.system) - (before.user + before.system)

    cpu = asyncio.run_coroutine_threadsafe(all_workers(), aio.event_loop()).result()
    clients.close_all()
    latencies.sort()
    return (
        len(latencies) / seconds,
        latencies[len(latencies) // 2] * 1000,
        latencies[int(len(latencies) * 0.99)] * 1000,
        cpu / len(latencies) * 1000,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency", type=float, default=0.2, help="fake model latency per request (s)")
    parser.add_argument("--concurrency", default="32,64,256", help="comma list of requests in flight")
    parser.add_argument("--seconds", type=float, default=6.0, help="per run")
    parser.add_argument("--rounds", type=int, default=3, help="runs per transport and concurrency (median shown)")
    args = parser.parse_args()
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER.format(root=str(ROOT), latency=args.latency)], stdout=subprocess.PIPE, text=True
    )
    try:
        url = server.stdout.readline().strip() if server.stdout else ""
        if not url:
            raise SystemExit("the fake model server did not start")
        rows = []
        for concurrency in [int(c) for c in args.concurrency.split(",")]:
            results: dict[str, list[tuple[float, float, float, float]]] = {t: [] for t in TRANSPORTS}
            for round_ in range(args.rounds):
                order = TRANSPORTS if round_ % 2 == 0 else TRANSPORTS[::-1]
                for transport in order:
                    results[transport].append(run(url, transport, concurrency, args.seconds))
            for transport in TRANSPORTS:
                median = [statistics.median(values) for values in zip(*results[transport], strict=True)]
                rows.append((concurrency, transport, *median))
    finally:
        server.kill()
    print(f"\nModel requests through the SDK, fake server at {args.latency * 1000:.0f} ms, median of {args.rounds}")
    print("| in flight | transport | requests/s | ideal | ratio | p50 ms | p99 ms | client CPU ms/request |")
    print("|---|---|---|---|---|---|---|---|")
    for concurrency, transport, rate, p50, p99, cpu in rows:
        ideal = concurrency / args.latency
        print(
            f"| {concurrency} | {transport} | {rate:.0f} | {ideal:.0f} | {rate / ideal:.2f} | {p50:.0f} | {p99:.0f} "
            f"| {cpu:.2f} |"
        )


if __name__ == "__main__":
    main()
