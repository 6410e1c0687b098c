"""A child of `make run` stops when `make run` itself is gone, even killed with SIGKILL (no chance to stop it).

The supervisor (eigenflux.devstack) names itself in EIGENFLUX_PARENT_PID; each child's entry point (manage.py,
eigenflux.asgi) calls `watch_parent_from_environment()` first thing. On Linux the kernel sends the child SIGTERM
the moment its parent dies (prctl PR_SET_PDEATHSIG; it fires when the parent *thread* that forked exits, and
the supervisor starts its children from its main thread). Elsewhere (macOS) a thread notices within a second
that the parent pid changed and sends the SIGTERM itself. Either way the child shuts down gracefully, as on
Ctrl-C; one that is still running STOP_BACKSTOP_SECONDS later exits at once, as the supervisor would have
killed it. The variable is removed from the environment, so the child's own children do not inherit it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys
import threading
import time

ENV = "EIGENFLUX_PARENT_PID"
POLL_SECONDS = 0.5
STOP_BACKSTOP_SECONDS = 40.0  # the supervisor's own wait: PIPELINE_GRACE_SECONDS (20) + 10, and some to spare
_PR_SET_PDEATHSIG = 1


def watch_parent_from_environment() -> None:
    value = os.environ.pop(ENV, "")
    if value:
        watch_parent(int(value))


def watch_parent(parent: int) -> None:
    by_kernel = _kernel_signals_parent_death()
    if os.getppid() != parent:  # it died before the kernel was told to watch
        os.kill(os.getpid(), signal.SIGTERM)
        return
    threading.Thread(target=_watch, args=(parent, not by_kernel), name="parent-watch", daemon=True).start()


def _kernel_signals_parent_death() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _watch(parent: int, signal_it: bool) -> None:
    while os.getppid() == parent:
        time.sleep(POLL_SECONDS)
    if signal_it:
        os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(STOP_BACKSTOP_SECONDS)  # the graceful stop's time; a child still here is stuck
    os._exit(1)
