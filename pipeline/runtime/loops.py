"""The runtime's threads, each a loop that survives any exception.

A loop that raises is logged, counted (eigenflux_pipeline_loop_errors_total) and entered again after a
short pause; its state lives on the runner, so re-entering loses nothing. Each loop ticks on every turn, so
a loop that is alive but stuck shows as stalled. A loop thread that dies anyway (a BaseException) is seen
by the supervisor, which stops the process with a non-zero status: never a live-looking zombie.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LoopStatus:
    name: str
    alive: bool
    idle_seconds: float  # since its last tick
    errors: int
    watched: bool  # expected to tick within the stall limit (handler threads may work for long)

    def healthy(self, stall_seconds: float) -> bool:
        return self.alive and (not self.watched or self.idle_seconds <= stall_seconds)


class Loops:
    """The loop threads of one runner."""

    def __init__(self, owner: str, *, on_error: Callable[[str], None], pause: float = 0.5):
        self.owner = owner
        self._on_error = on_error
        self._pause = pause
        self._threads: dict[str, threading.Thread] = {}
        self._watched: dict[str, bool] = {}
        self._ticks: dict[str, float] = {}
        self._errors: dict[str, int] = {}

    def start(self, name: str, body: Callable[[], None], *, watched: bool = True) -> threading.Thread:
        """Run `body` in a daemon thread; when it raises, log, count and run it again until it returns."""
        self._ticks[name] = time.monotonic()
        self._errors[name] = 0
        self._watched[name] = watched
        thread = threading.Thread(target=self._guard, args=(name, body), name=f"{self.owner}-{name}", daemon=True)
        self._threads[name] = thread
        thread.start()
        return thread

    def _guard(self, name: str, body: Callable[[], None]) -> None:
        while True:
            try:
                body()
                return
            except Exception:
                log.exception("%s: %s loop failed; carrying on", self.owner, name)
                self._errors[name] += 1
                self._on_error(name)
                time.sleep(self._pause)

    def tick(self, name: str) -> None:
        self._ticks[name] = time.monotonic()

    def thread(self, name: str) -> threading.Thread:
        return self._threads[name]

    def statuses(self) -> list[LoopStatus]:
        now = time.monotonic()
        return [
            LoopStatus(
                name=name,
                alive=thread.is_alive(),
                idle_seconds=round(now - self._ticks.get(name, now), 3),
                errors=self._errors.get(name, 0),
                watched=self._watched[name],
            )
            for name, thread in self._threads.items()
        ]

    def dead(self) -> list[str]:
        return [name for name, thread in self._threads.items() if not thread.is_alive()]
