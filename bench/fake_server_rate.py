"""How many requests a second the fake model server (tests/fakes/openai_server.py) answers on one core.

The server runs in a child process pinned to one CPU (sched_setaffinity), with no added latency; this process
sends the pipeline's kinds of request (a Responses call carrying a task marker, and a base64 embedding) with
aiohttp, C at a time, for a few seconds. Printed: requests/s, and the server's CPU per request (from /proc),
whose inverse is what one core can serve when the client is not the limit.

    flock /tmp/eigenflux-bench.lock .venv/bin/python bench/fake_server_rate.py [--seconds 5] [--concurrency 32,256]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

REQUESTS = [
    (
        "/responses",
        {"model": "fake-safety", "instructions": "TASK: safety", "input": "Offering GPU hours.", "store": False},
    ),
    ("/embeddings", {"model": "fake-embedding", "input": ["Offering GPU hours."], "encoding_format": "base64"}),
]


def serve() -> None:
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    from tests.fakes.openai_server import FakeOpenAIServer

    server = FakeOpenAIServer().start()
    print(server.url, flush=True)
    sys.stdin.readline()
    server.stop()


async def load(url: str, concurrency: int, seconds: float) -> int:
    import aiohttp

    done = 0
    stop_at = time.monotonic() + seconds
    headers = {"authorization": "Bearer sk-fake", "content-type": "application/json"}
    bodies = [(url + path, json.dumps(body)) for path, body in REQUESTS]

    async def worker(k: int, session: aiohttp.ClientSession) -> None:
        nonlocal done
        while time.monotonic() < stop_at:
            target, body = bodies[(k + done) % len(bodies)]
            async with session.post(target, data=body, headers=headers) as response:
                await response.read()
                assert response.status == 200, response.status
            done += 1

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        await asyncio.gather(*(worker(k, session) for k in range(concurrency)))
    return done


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--concurrency", default="32,256")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve()
        return 0
    from bench.pipeline_throughput import proc_cpu

    proc = subprocess.Popen(
        [sys.executable, __file__, "--serve"], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdin is not None
    url = proc.stdout.readline().strip()
    print(f"fake server on one core, {args.seconds:.0f} s per run, load {os.getloadavg()[0]:.1f} at the start")
    print("| in flight | requests/s | server CPU ms/request | one core's capacity, requests/s |")
    print("|---|---|---|---|")
    try:
        for spec in args.concurrency.split(","):
            cpu = proc_cpu(proc.pid)
            started = time.monotonic()
            done = asyncio.run(load(url, int(spec), args.seconds))
            elapsed = time.monotonic() - started
            per_request = (proc_cpu(proc.pid) - cpu) / done
            print(f"| {spec} | {done / elapsed:.0f} | {per_request * 1000:.3f} | {1 / per_request:.0f} |", flush=True)
    finally:
        proc.stdin.write("\n")
        proc.stdin.flush()
        proc.wait(10)
    print(f"load {os.getloadavg()[0]:.1f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
