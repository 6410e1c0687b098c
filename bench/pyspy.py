"""A py-spy sampling profile of benchmark processes over a measured window (bench/pipeline_throughput.py
--py-spy PATH): samples of threads holding the GIL, i.e. the process's Python CPU, as collapsed stacks."""

from __future__ import annotations

import signal
import subprocess
import time


def spy_start(args, pids: list[int], config) -> list[subprocess.Popen]:
    """With --py-spy: a sampling profile of each pipeline process over the measured window only (samples of
    threads holding the GIL, i.e. its Python CPU), written as collapsed stacks next to the logs."""
    if not args.py_spy:
        return []
    spies = []
    for k, pid in enumerate(pids):
        out = f"/tmp/eigenflux-pipebench-{config.label.replace(' ', '')}-{k}.spy.txt".replace("@", "at")
        command = [args.py_spy, "record", "--gil", "--nonblocking", "-r", "250", "-f", "raw", "-o", out]
        spies.append(subprocess.Popen([*command, "-p", str(pid)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    time.sleep(0.5)  # attached
    return spies


def spy_stop(spies: list[subprocess.Popen]) -> None:
    for spy in spies:
        spy.send_signal(signal.SIGINT)
    for spy in spies:
        spy.wait(60)
