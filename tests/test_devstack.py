"""`make run` (python -m eigenflux.devstack) stops cleanly with one Ctrl-C: the terminal's SIGINT goes to the
whole foreground process group, yet each child must receive exactly one signal (the supervisor's SIGTERM),
so the pipeline drains instead of reading a second signal as "exit now", and nothing outlives the stack."""

from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.test_embedded import wait_until

ROOT = Path(__file__).resolve().parent.parent
READY = "run_pipeline: ready (signal handlers installed)"
WEB_READY = "Uvicorn running on"  # logged once uvicorn has its signal handlers and its socket


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def children_of(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as fh:
        return [int(child) for child in fh.read().split()]


@pytest.mark.slow
def test_one_ctrl_c_stops_everything_and_the_pipeline_drains(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE")}
    env |= {
        "EIGENFLUX_DATA_DIR": str(tmp_path / "data"),  # servers of its own, stopped when the stack exits
        "PORT": str(free_port()),
        "PIPELINE_METRICS_PORT": str(free_port()),
        "PYTHONUNBUFFERED": "1",
    }
    log_path = tmp_path / "devstack.log"
    with open(log_path, "w") as log:
        # A session of its own makes the stack a process group like a terminal's foreground job.
        stack = subprocess.Popen(
            [sys.executable, "-m", "eigenflux.devstack"],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        # Both children that must shut down gracefully are past their start-up (a SIGTERM that arrives while
        # uvicorn still imports the application kills it with the default action, as it would any server).
        started = wait_until(
            lambda: (READY in (text := log_path.read_text()) and WEB_READY in text) or stack.poll() is not None,
            240,
        )
        assert started and stack.poll() is None, f"the stack did not start:\n{log_path.read_text()[-3000:]}"
        children = children_of(stack.pid)
        assert len(children) == 3, "web, pipeline and jobs"
        servers = [int((tmp_path / "data" / "pg" / "postmaster.pid").read_text().split()[0])]
        servers.append(int((tmp_path / "data" / "redis" / "redis.pid").read_text().strip()))

        signalled = time.monotonic()
        os.killpg(stack.pid, signal.SIGINT)  # what Ctrl-C does
        assert stack.wait(timeout=60) == 0, log_path.read_text()[-3000:]  # a hang guard, not a timing assert
        took = time.monotonic() - signalled
    finally:
        if stack.poll() is None:
            os.killpg(stack.pid, signal.SIGKILL)
            stack.wait()

    output = log_path.read_text()
    assert output.count("SIGTERM: stopping gracefully") == 1, output[-3000:]
    assert "SIGINT: stopping gracefully" not in output, "the terminal's SIGINT must not reach the pipeline"
    assert "second signal" not in output, output[-3000:]
    assert "pipeline exited with status 0" in output, output[-3000:]  # drained, not the second-signal exit
    assert "pipeline.runtime.supervisor stopped" in output, "the pipeline drained"
    assert "Finished server process" in output, "uvicorn shut down gracefully"
    assert wait_until(lambda: not any(alive(pid) for pid in children), 10), "a child outlived the stack"
    assert wait_until(lambda: not any(alive(pid) for pid in servers), 20), "an embedded server outlived the stack"
    print(f"stopped {took:.1f}s after SIGINT")


def test_make_run_makes_a_metrics_token_up_keeps_it_private_and_never_prints_an_operators(settings, tmp_path):
    from eigenflux.devstack import _metrics_token

    settings.DATA_DIR, settings.METRICS_TOKEN = tmp_path, ""
    token, banner = _metrics_token(settings)
    assert len(token) >= 32 and f"Bearer {token}" in banner
    assert _metrics_token(settings)[0] == token  # the same one on the next start
    assert stat.S_IMODE((tmp_path / "demo-metrics-token").stat().st_mode) == 0o600
    settings.METRICS_TOKEN = "operators-own"
    assert _metrics_token(settings) == ("operators-own", "your METRICS_TOKEN")
