"""Long-lived objects are kept out of the cyclic garbage collector's full passes (gc.freeze).

A full (generation 2) collection walks every object the collector tracks. Once Django, the API's routes,
jieba's dictionary, the search lexicon and the local model are loaded, a web process holds 300k+ such
objects, and a full pass took 100-400 ms on this project's 2-core machine: whichever request allocated the
object that triggered it waited that long (it was the slowest request in the search latency bench).
Almost all of those objects live as long as the process, so walking them finds nothing.

`freeze()` moves every object alive now into the collector's permanent generation, which later passes skip.
It is called when a process has loaded its application, and again after each large one-time load that
happens on first use (jieba, the lexicons, the local model), so startup stays lazy. A web process freezes once
more when its first request has finished (freeze_after_first_request): that request builds what every later one
reuses (URL resolvers, the API's schemas and validators, the ranking's settings), some 30k objects, and while
they stayed young a full pass took 14-22 ms of a feed request at 100k items (2 ms after). Objects frozen by
mistake (a request's, caught mid-flight) are still freed by reference counting when released; only a
reference cycle among them would outlive its use. GC_FREEZE=false turns this off.
"""

from __future__ import annotations

import functools
import gc
import logging
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from django.conf import settings
from django.core.signals import request_finished

log = logging.getLogger(__name__)
_lock = threading.Lock()
_UID = "eigenflux-freeze-after-first-request"
T = TypeVar("T")


def freeze(after: str) -> None:
    """Collect what is garbage now, then freeze everything still alive (`after` names the load, for the log)."""
    if not settings.GC_FREEZE:
        return
    with _lock:  # two first loads at once in two threads: one pass each, not interleaved
        started = time.perf_counter()
        gc.collect()
        gc.freeze()
        log.debug(
            "gc: froze %d long-lived objects after %s (%.0f ms)",
            gc.get_freeze_count(),
            after,
            (time.perf_counter() - started) * 1000,
        )


def _after_first_request(sender, **kwargs) -> None:
    request_finished.disconnect(dispatch_uid=_UID)
    freeze("the first request")


def freeze_after_first_request() -> None:
    """Freeze once more when the process's first request has finished (once per process)."""
    request_finished.connect(_after_first_request, dispatch_uid=_UID)


def loaded_once(after: str) -> Callable[[Callable[[], T]], Callable[[], T]]:
    """For a large one-time load on first use (a model trained from shipped text, a dictionary): made once per
    process however many threads ask at once — functools.cache would let each of a pipeline's handler threads
    that starts before the first has finished compute its own (seconds of CPU each) — then frozen (`after`
    names it for the log). `.cache_clear()` forgets it (tests)."""

    def decorate(load: Callable[[], T]) -> Callable[[], T]:
        lock = threading.Lock()
        box: list[T] = []

        @functools.wraps(load)
        def loaded() -> T:
            if not box:
                with lock:
                    if not box:
                        box.append(load())
                        freeze(after)
            return box[0]

        loaded.cache_clear = box.clear  # type: ignore[attr-defined]
        return loaded

    return decorate
