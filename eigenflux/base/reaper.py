"""Stops the embedded servers a `make run` started when that `make run` is killed (SIGKILL: no exit hook of its
runs). `python -m eigenflux.base.reaper DATA_DIR STACK_PID NAME…`, started by eigenflux.devstack in a session of
its own, so that nothing aimed at the stack reaches it.

It waits for the stack to exit. A stack that stopped itself (Ctrl-C, or a failed start) cleared its lock file
(eigenflux.base.devlock) and stopped what it had started: nothing to do. A killed stack left its lock file as it
was: the reaper waits until no process listed as a user of the servers is alive (the stack's children drain
first, eigenflux.base.parentwatch), takes the stack's lock so that no new `make run` can join the servers
meanwhile, and then stops each server the stack had started, as their last user: it joins and exits. A server
that another process still uses, or that the stack had only joined, is left running; a new `make run` that
already holds the lock keeps them.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time
from pathlib import Path

from eigenflux.base import embedded
from eigenflux.base.devlock import LOCK_NAME

POLL_SECONDS = 0.5
NAMES = {"postgresql": "PostgreSQL", "redis": "Redis"}


def _wait_for_exit(pid: int) -> None:
    while embedded.alive(pid):
        time.sleep(POLL_SECONDS)


def _killed(lock_path: Path, stack_pid: int) -> bool:
    """The stack's lock file still names it: it did not get to clear it (DevstackLock.release)."""
    try:
        return json.loads(lock_path.read_text() or "{}").get("pid") == stack_pid
    except (OSError, ValueError, AttributeError):
        return False


def _take_lock(lock_path: Path) -> int | None:
    fd = os.open(lock_path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:  # a new `make run` holds it, and uses the servers
        os.close(fd)
        return None
    return fd


def reap(data_dir: Path, stack_pid: int, started: list[str]) -> str:
    """What the reaper did, in one line (empty when the stack stopped itself)."""
    lock_path = data_dir / LOCK_NAME
    _wait_for_exit(stack_pid)
    if not _killed(lock_path, stack_pid):
        return ""
    while embedded.live_users(data_dir):
        time.sleep(POLL_SECONDS)
    fd = _take_lock(lock_path)
    if fd is None:
        return f"make run (pid {stack_pid}) was killed; a new make run uses its embedded servers, left running."
    try:
        running = embedded.running_servers(data_dir)
        stopping = {name: pid for name, pid in running.items() if name in started}
        if not stopping or embedded.live_users(data_dir):
            return ""
        if "postgresql" in stopping:
            embedded.postgres_url(data_dir)  # joined: this process is now the last user, and stops it at exit
        if "redis" in stopping:
            embedded.redis_url(data_dir)
        os.ftruncate(fd, 0)  # nothing of that stack is left to report
    finally:
        os.close(fd)
    listed = " and ".join(f"the embedded {NAMES[name]} (pid {pid})" for name, pid in stopping.items())
    return f"make run (pid {stack_pid}) was killed; stopping {listed} it had started."


def main(argv: list[str]) -> int:
    data_dir, stack_pid, started = Path(argv[0]), int(argv[1]), argv[2:]
    message = reap(data_dir, stack_pid, started)
    if message:
        print(f"\n{message}", file=sys.stderr, flush=True)
    return 0  # exit hooks stop the servers joined above


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
