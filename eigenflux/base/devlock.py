"""One `make run` per data directory: `.data/devstack.lock`, held (flock) by the running supervisor, says who runs.

A second `make run` reads it before it starts anything (embedded servers, migrations, children) and refuses
with a message naming the running supervisor, or the children a crashed one left behind, and the command that
stops them; it also refuses when the web port is taken by some other program. The lock is released by the
kernel when its holder exits, however it exits; the children's pids stay in the file so that a later start can
tell whether they outlived it (eigenflux.base.parentwatch makes that rare).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
from pathlib import Path

LOCK_NAME = "devstack.lock"


class StackRunning(Exception):
    """Another stack (or what is left of one) holds this data directory or the web port: the message says which."""


class DevstackLock:
    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd = fd

    def record(self, *, host: str, port: str, children: dict[str, tuple[int, list[str]]]) -> None:
        """Write who runs: this supervisor, the web address, and each child's pid and command line."""
        state = {"pid": os.getpid(), "url": f"http://{host}:{port}", "children": children}
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, json.dumps(state).encode(), 0)

    def release(self) -> None:
        """Everything this stack started has stopped: nothing left to report."""
        os.ftruncate(self._fd, 0)
        os.close(self._fd)


def devstack_lock(data_dir: Path, *, host: str, port: str) -> DevstackLock:
    """Take the data directory's lock, or raise StackRunning explaining who has it."""
    path = data_dir / LOCK_NAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        state = _read(fd)
        os.close(fd)
        pid = state.get("pid", "?")
        raise StackRunning(
            f"EigenFlux is already running from {data_dir} (make run, pid {pid}, web on {state.get('url', '?')}).\n"
            f"Stop it with Ctrl-C in its terminal, or: kill {pid}"
        ) from None
    try:
        _refuse_leftovers(_read(fd))
        _refuse_taken_port(host, port)
    except StackRunning:
        os.close(fd)
        raise
    return DevstackLock(path, fd)


def _read(fd: int) -> dict:
    with contextlib.suppress(OSError, ValueError):
        return json.loads(os.pread(fd, 1 << 16, 0) or b"{}")
    return {}


def _refuse_leftovers(state: dict) -> None:
    left = {name: pid for name, (pid, command) in (state.get("children") or {}).items() if _still_running(pid, command)}
    if left:
        listed = ", ".join(f"{name} {pid}" for name, pid in left.items())
        raise StackRunning(
            f"a `make run` that did not stop cleanly (pid {state.get('pid', '?')}, gone) left these running: "
            f"{listed}.\nStop them with: kill {' '.join(str(pid) for pid in left.values())}"
        )


def _still_running(pid: int, command: list[str]) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False  # another user's process: the pid was reused
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:  # a reused pid runs something else
            return fh.read().split(b"\0")[:-1] == [part.encode() for part in command]
    except FileNotFoundError:
        return not os.path.isdir("/proc")  # no /proc (macOS): the pid is alive, take it for the child
    except OSError:
        return True


def _refuse_taken_port(host: str, port: str) -> None:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds: TIME_WAIT is no obstacle
        try:
            sock.bind((host, int(port)))
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
            raise StackRunning(
                f"port {port} on {host} is taken by another program, so the web server could not start.\n"
                f"Stop that program, or choose another port: PORT={int(port) + 1} make run"
            ) from None
