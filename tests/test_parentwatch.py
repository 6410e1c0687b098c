"""A child armed with EIGENFLUX_PARENT_PID stops when its parent dies, even SIGKILLed: by the kernel's
parent-death signal on Linux, and by the parent-pid watch where there is none (macOS), tried here on Linux too."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_devstack import alive  # a zombie nobody reaps yet counts as gone
from tests.test_embedded import wait_until

ROOT = Path(__file__).resolve().parent.parent

# The child: arms the watch (optionally without the kernel's help), says so, then waits for its SIGTERM.
CHILD = """
import signal, sys, time
from eigenflux.base import parentwatch
if sys.argv[1] == "watch-only":
    parentwatch._kernel_signals_parent_death = lambda: False
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
parentwatch.watch_parent_from_environment()
print("armed", flush=True)
time.sleep(120)
sys.exit(3)
"""

# The parent: starts the child with its own pid in EIGENFLUX_PARENT_PID, prints the child's pid, then waits.
PARENT = """
import os, subprocess, sys, time
child = subprocess.Popen(
    [sys.executable, "-c", sys.argv[1], sys.argv[2]], env=os.environ | {"EIGENFLUX_PARENT_PID": str(os.getpid())},
    stdout=sys.stdout,
)
print(child.pid, flush=True)
time.sleep(120)
"""


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["kernel", "watch-only"])
def test_a_child_stops_when_its_parent_is_killed(mode):
    parent = subprocess.Popen([sys.executable, "-c", PARENT, CHILD, mode], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        child = int(parent.stdout.readline())
        assert parent.stdout.readline().strip() == "armed"
        assert alive(child)
        parent.kill()  # SIGKILL: the parent can do nothing for its child
        parent.wait()
        assert wait_until(lambda: not alive(child), 30), "the child outlived its killed parent"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
