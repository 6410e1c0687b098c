"""What a second `make run` says before it starts anything: a stack holding the data directory's lock (named by
pid, with the command that stops it), children a crashed stack left running, a web port taken by another program.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sys

import pytest

from eigenflux.base.devlock import LOCK_NAME, StackRunning, devstack_lock


def free_port() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return str(sock.getsockname()[1])


def own_command() -> list[str]:
    """This process's command line, as the lock file records a child's."""
    if sys.platform.startswith("linux"):
        with open("/proc/self/cmdline", "rb") as fh:
            return [part.decode() for part in fh.read().split(b"\0")[:-1]]
    return [sys.executable]


def test_a_running_stack_is_named_with_the_command_that_stops_it(tmp_path):
    port = free_port()
    running = devstack_lock(tmp_path, host="127.0.0.1", port=port)
    running.record(host="127.0.0.1", port=port, children={"web": (os.getpid(), own_command())})
    with pytest.raises(StackRunning) as refused:
        devstack_lock(tmp_path, host="127.0.0.1", port=port)
    message = str(refused.value)
    assert f"make run, pid {os.getpid()}, web on http://127.0.0.1:{port}" in message
    assert f"kill {os.getpid()}" in message
    running.release()
    devstack_lock(tmp_path, host="127.0.0.1", port=port).release()  # free again once the stack is gone


def test_children_a_crashed_stack_left_running_are_named(tmp_path):
    # The lock is free (its holder is gone) but the file still lists a child that runs: this process.
    state = {"pid": 999_999_999, "url": "http://127.0.0.1:1", "children": {"web": [os.getpid(), own_command()]}}
    (tmp_path / LOCK_NAME).write_text(json.dumps(state))
    with pytest.raises(StackRunning) as refused:
        devstack_lock(tmp_path, host="127.0.0.1", port=free_port())
    assert f"left these running: web {os.getpid()}" in str(refused.value)
    assert f"kill {os.getpid()}" in str(refused.value)


def test_a_listed_pid_that_now_runs_something_else_is_not_a_leftover(tmp_path):
    state = {"pid": 999_999_999, "children": {"web": [os.getpid(), ["python", "-m", "uvicorn", "elsewhere"]]}}
    (tmp_path / LOCK_NAME).write_text(json.dumps(state))
    if sys.platform.startswith("linux"):  # without /proc a live pid is taken for the child
        devstack_lock(tmp_path, host="127.0.0.1", port=free_port()).release()


def test_a_taken_web_port_is_refused_before_anything_starts(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(StackRunning) as refused:
            devstack_lock(tmp_path, host="127.0.0.1", port=str(port))
    assert f"port {port} on 127.0.0.1 is taken" in str(refused.value)
    # Refused, it holds nothing: the next start takes the lock.
    with open(tmp_path / LOCK_NAME) as fh:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
