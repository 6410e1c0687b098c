"""Model requests wait on one asyncio event loop per process, not on a thread each.

The pipeline's handlers are threads; a model call may take seconds. Each request runs as a task on a single
event loop (one daemon thread, made on first use and again in a forked child), using the SDK's async client,
so hundreds of requests in flight cost sockets, not threads or CPU. The calling thread submits the
coroutine and blocks on its future (no polling); a cancel aborts the task, which closes the request.

Cancellation: the runtime's lease event (pipeline.runtime.event.CancelEvent) calls back when set, so the
future is cancelled at once. Any other threading.Event still works: one watcher thread per process looks at
such events every 50 ms while calls with one are in flight (tests and management commands pass plain events).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from pipeline.llm.errors import CallCancelled

T = TypeVar("T")
_PLAIN_EVENT_CHECK_SECONDS = 0.05
_CLOSE_WAIT_SECONDS = 2.0

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_loop_pid: int | None = None
_loop_thread: threading.Thread | None = None
_plain: dict[concurrent.futures.Future[Any], threading.Event] = {}
_plain_wake = threading.Condition(_lock)
_watcher_pid: int | None = None


def event_loop() -> asyncio.AbstractEventLoop:
    """This process's model-call loop, started on first use (a fork gets a loop of its own)."""
    global _loop, _loop_pid, _loop_thread
    pid = os.getpid()
    with _lock:
        if _loop is None or _loop_pid != pid:
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="model-io", daemon=True)
            thread.start()
            _loop, _loop_pid, _loop_thread = loop, pid, thread
        return _loop


def close_soon(client: Any, loop: object, *, wait: bool = False) -> None:
    """Close an async client on the loop its connections belong to; nothing when that loop is not this
    process's running one (a parent's, after a fork). `wait`: up to a few seconds, never from the loop."""
    with _lock:
        current = _loop if loop is _loop and _loop_pid == os.getpid() else None
    if current is None or not current.is_running():
        return
    future = asyncio.run_coroutine_threadsafe(client.close(), current)
    if wait and threading.current_thread() is not _loop_thread:
        with contextlib.suppress(Exception):  # closing is best effort: the process is going away
            future.result(_CLOSE_WAIT_SECONDS)


async def _awaited(make: Callable[[], Awaitable[T]]) -> T:
    return await make()


def run(make: Callable[[], Awaitable[T]], cancel: threading.Event | None) -> T:
    """Await `make()` on the model loop and wait for the result; CallCancelled when `cancel` is set first."""
    if cancel is not None and cancel.is_set():
        raise CallCancelled("cancelled before the request was sent")
    future = asyncio.run_coroutine_threadsafe(_awaited(make), event_loop())
    if cancel is None:
        return future.result()
    subscribe = getattr(cancel, "subscribe", None)
    unsubscribe = subscribe(future.cancel) if subscribe is not None else _watch(cancel, future)
    try:
        return future.result()
    except concurrent.futures.CancelledError:
        raise CallCancelled("cancelled while waiting for the model") from None
    finally:
        unsubscribe()


def _watch(cancel: threading.Event, future: concurrent.futures.Future[Any]) -> Callable[[], None]:
    global _watcher_pid
    with _lock:
        _plain[future] = cancel
        if _watcher_pid != os.getpid():
            threading.Thread(target=_watch_plain_events, name="model-cancel-watch", daemon=True).start()
            _watcher_pid = os.getpid()
        _plain_wake.notify()

    def unwatch() -> None:
        with _lock:
            _plain.pop(future, None)

    return unwatch


def _watch_plain_events() -> None:
    while True:
        with _lock:
            while not _plain:
                _plain_wake.wait()
            fired = [future for future, event in _plain.items() if event.is_set()]
        for future in fired:
            future.cancel()
        with _lock:
            _plain_wake.wait(_PLAIN_EVENT_CHECK_SECONDS)
