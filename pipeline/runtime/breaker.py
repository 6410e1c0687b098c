"""Circuit breakers: an outage of a dependency pauses a consumer instead of draining it into dead letters.

One CircuitBreaker per dependency (PostgreSQL, the model endpoint, Redis) and per consumer runner, so a
consumer that never touches the model is never paused by a model outage. Pure objects with an injectable
clock, tested without any server.

- closed: entries start freely. When entries fail because of the dependency, `threshold` *different*
  entries in a row (no success of the dependency in between) open the breaker at once. Below that, the
  runtime asks the dependency itself (pipeline.runtime.dependencies.is_up) and `trip`s the breaker if it is
  down for everyone — so even a single entry in flight is not drained; if it is up, the failure is the
  entry's own: its deliveries count and it ends in a dead letter.
- open: no entry starts. Failures while open are the outage's, not the entries': the runtime hands those
  entries back without spending a delivery. After `open_seconds` the breaker is half-open.
- half-open: one probe. The runtime probes the dependency directly (SELECT 1, PING, GET /models); an entry
  admitted as the probe works too. A success closes the breaker; a failure opens it again for twice as long
  (capped at `max_open_seconds`); a probe that ended without using the dependency gives its slot back.
"""

from __future__ import annotations

import enum
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any


class State(enum.StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


class Admit(enum.Enum):
    ALLOW = "allow"
    PROBE = "probe"
    DENY = "deny"


class CircuitBreaker:
    def __init__(
        self,
        name: str,
        *,
        threshold: int = 3,
        open_seconds: float = 1.0,
        max_open_seconds: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ):
        if threshold < 1 or open_seconds <= 0 or max_open_seconds < open_seconds:
            raise ValueError(f"invalid circuit breaker settings for {name}")
        self.name = name
        self.threshold = threshold
        self.open_seconds = open_seconds
        self.max_open_seconds = max_open_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._state = State.CLOSED
        self._failing: set[str] = set()
        self._opened_at = 0.0
        self._open_for = open_seconds
        self._probing = False
        self.opened = 0  # times it opened (for metrics and tests)

    # --- reading ------------------------------------------------------------------------------------
    @property
    def state(self) -> State:
        with self._lock:
            return self._current()

    def _current(self) -> State:
        if self._state is State.OPEN and self._clock() - self._opened_at >= self._open_for:
            self._state = State.HALF_OPEN
        return self._state

    def ready(self) -> bool:
        """Would `admit` let an entry start now (without taking the probe slot)?"""
        with self._lock:
            state = self._current()
            return state is State.CLOSED or (state is State.HALF_OPEN and not self._probing)

    def retry_in(self) -> float:
        """Seconds until the breaker lets a probe through (0 unless open)."""
        with self._lock:
            if self._current() is not State.OPEN:
                return 0.0
            return max(0.0, self._opened_at + self._open_for - self._clock())

    # --- admitting an entry ---------------------------------------------------------------------------
    def admit(self) -> Admit:
        """May an entry start now? PROBE reserves the half-open breaker's single probe slot."""
        with self._lock:
            state = self._current()
            if state is State.CLOSED:
                return Admit.ALLOW
            if state is State.HALF_OPEN and not self._probing:
                self._probing = True
                return Admit.PROBE
            return Admit.DENY

    def abandon_probe(self) -> None:
        """The probe ended without using the dependency (or never started): another entry may probe."""
        with self._lock:
            self._probing = False

    # --- outcomes -------------------------------------------------------------------------------------
    def success(self, at: float | None = None) -> None:
        """The dependency answered. `at` (clock time of that use) older than the last opening is stale news
        from an entry that started before the outage and is ignored."""
        with self._lock:
            if at is not None and self._state is not State.CLOSED and at < self._opened_at:
                return
            self._state = State.CLOSED
            self._failing.clear()
            self._open_for = self.open_seconds
            self._probing = False

    def failure(self, entry: str, *, probe: bool = False) -> bool:
        """An entry failed because of the dependency. True if that is an outage (the breaker is open now):
        the entry then keeps its delivery budget."""
        with self._lock:
            state = self._current()
            if state is State.CLOSED:
                self._failing.add(entry)
                if len(self._failing) >= self.threshold:
                    self._open(self.open_seconds)
                    return True
                return False
            if probe or state is State.HALF_OPEN:
                self._open(min(self._open_for * 2, self.max_open_seconds))
            return True

    def trip(self) -> None:
        """Open at once: the runtime itself cannot reach the dependency (e.g. Redis for its own reads)."""
        with self._lock:
            if self._current() is State.CLOSED:
                self._open(self.open_seconds)
            elif self._state is State.HALF_OPEN:
                self._open(min(self._open_for * 2, self.max_open_seconds))

    def _open(self, seconds: float) -> None:
        self._state = State.OPEN
        self._opened_at = self._clock()
        self._open_for = seconds
        self._failing.clear()
        self._probing = False
        self.opened += 1


@dataclass(frozen=True)
class Admission:
    """Permission for one entry to start; `probes` names the half-open breakers it probes."""

    probes: frozenset[str] = field(default_factory=frozenset)


class Breakers:
    """The breakers of one consumer runner, consulted together before an entry starts."""

    def __init__(self, names: Iterable[str], **knobs: Any) -> None:
        self.by_name = {name: CircuitBreaker(name, **knobs) for name in names}

    def admit(self) -> Admission | None:
        """None while any breaker is open (or half-open with its probe taken)."""
        taken: list[CircuitBreaker] = []
        for breaker in self.by_name.values():
            verdict = breaker.admit()
            if verdict is Admit.DENY:
                for probe in taken:
                    probe.abandon_probe()
                return None
            if verdict is Admit.PROBE:
                taken.append(breaker)
        return Admission(frozenset(b.name for b in taken))

    def all_closed(self) -> bool:
        return all(b.state is State.CLOSED for b in self.by_name.values())

    def ready(self) -> bool:
        """Would `admit` let an entry start now (a probe included)?"""
        return all(b.ready() for b in self.by_name.values())

    def retry_in(self) -> float:
        return max((b.retry_in() for b in self.by_name.values()), default=0.0)

    def settle(
        self,
        admission: Admission,
        *,
        entry: str,
        ok: dict[str, float],
        failed_dependency: str | None,
    ) -> bool:
        """Feed one handler run's observations to the breakers; True if its failure is an outage."""
        for name, at in ok.items():
            if name in self.by_name and name != failed_dependency:
                self.by_name[name].success(at)
        outage = False
        if failed_dependency in self.by_name:
            outage = self.by_name[failed_dependency].failure(entry, probe=failed_dependency in admission.probes)
        for name in admission.probes:
            if name not in ok and name != failed_dependency:
                self.by_name[name].abandon_probe()
        return outage

    def release(self, admission: Admission) -> None:
        """The admitted entry did not start after all."""
        for name in admission.probes:
            self.by_name[name].abandon_probe()

    def states(self) -> dict[str, str]:
        return {name: str(b.state) for name, b in self.by_name.items()}
