"""Circuit breakers: an outage of a dependency pauses a consumer instead of draining it into dead letters.

One CircuitBreaker per dependency (PostgreSQL, the model endpoint, Redis) and per consumer runner, so a
consumer that never touches the model is never paused by a model outage. Pure objects with an injectable
clock, tested without any server.

- closed: entries start freely. When entries fail because of the dependency, `threshold` *different*
  entries in a row (no success of the dependency in between) open the breaker at once. Below that, the
  runtime asks the dependency itself (pipeline.runtime.dependencies.probe) and `trip`s the breaker if it says
  down — so even a single entry in flight is not drained; otherwise (up, or the probe cannot tell) the
  failure is the entry's own: its deliveries count and it ends as its retry policy says.
- open: no entry starts. Failures while open are the outage's, not the entries': the runtime hands those
  entries back without spending a delivery. After `open_seconds` the breaker is half-open.
- half-open: the runtime probes the dependency directly (SELECT 1, PING, GET /models) and hands the verdict
  to `probed`. The probe is a hint, not the truth (a gateway may serve the model but no GET /models): up
  closes the breaker; down or "cannot tell" lets exactly one real entry through (the trial; `trial=False`
  breakers, whose probe is the runtime's own access path, re-open on down instead). The trial's success
  closes the breaker; its failure opens it again for twice as long (capped at `max_open_seconds`) and spends
  nothing when the probe said down, but counts as the entry's own attempt when the probe said up or could
  not tell. A trial that ended without using the dependency gives its slot back; a verdict older than the
  open interval is asked again (an idle half-open breaker still notices the dependency coming back).

`open_age` says how long the breaker has not been closed (open and half-open alike), for the health page,
readiness and the alert on a breaker that stays open.
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


class Verdict(enum.StrEnum):
    """What a direct probe of the dependency said."""

    UP = "up"
    DOWN = "down"
    UNKNOWN = "unknown"  # it answered, but not the question (e.g. an endpoint that serves no GET /models)


class Admit(enum.Enum):
    ALLOW = "allow"
    PROBE = "probe"  # the half-open breaker's one trial entry
    DENY = "deny"


class CircuitBreaker:
    def __init__(
        self,
        name: str,
        *,
        threshold: int = 3,
        open_seconds: float = 1.0,
        max_open_seconds: float = 10.0,
        trial: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ):
        if threshold < 1 or open_seconds <= 0 or max_open_seconds < open_seconds:
            raise ValueError(f"invalid circuit breaker settings for {name}")
        self.name = name
        self.threshold = threshold
        self.open_seconds = open_seconds
        self.max_open_seconds = max_open_seconds
        self.trial = trial
        self._clock = clock
        self._lock = threading.Lock()
        self._state = State.CLOSED
        self._failing: set[str] = set()
        self._opened_at = 0.0
        self._open_for = open_seconds
        self._probing = False
        self._hint: Verdict | None = None  # the probe's verdict in this half-open period
        self._hinted_at = 0.0
        self._since: float | None = None  # clock time it last left closed
        self.opened = 0  # times it opened (for metrics and tests)

    # --- reading ------------------------------------------------------------------------------------
    @property
    def state(self) -> State:
        with self._lock:
            return self._current()

    @property
    def hint(self) -> Verdict | None:
        """The probe's verdict this half-open period (None: not asked yet, or not half-open)."""
        with self._lock:
            return self._hint

    def _current(self) -> State:
        if self._state is State.OPEN and self._clock() - self._opened_at >= self._open_for:
            self._state = State.HALF_OPEN
        return self._state

    def ready(self) -> bool:
        """Would `admit` let an entry start now (without taking the trial slot)?"""
        with self._lock:
            state = self._current()
            return state is State.CLOSED or (state is State.HALF_OPEN and self._trial_free())

    def _trial_free(self) -> bool:
        return self._hint is not None and not self._probing

    def retry_in(self) -> float:
        """Seconds until the breaker is half-open (0 unless open)."""
        with self._lock:
            if self._current() is not State.OPEN:
                return 0.0
            return max(0.0, self._opened_at + self._open_for - self._clock())

    def open_age(self) -> float:
        """Seconds since the breaker last left closed (0 while closed)."""
        with self._lock:
            return 0.0 if self._since is None else max(0.0, self._clock() - self._since)

    # --- probing --------------------------------------------------------------------------------------
    def needs_probe(self) -> bool:
        """Half-open with no trial under way and no verdict, or one older than the open interval."""
        with self._lock:
            if self._current() is not State.HALF_OPEN or self._probing:
                return False
            return self._hint is None or self._clock() - self._hinted_at >= self._open_for

    def probed(self, verdict: Verdict) -> None:
        """The probe's verdict: up closes; down or unknown lets one trial entry through (down re-opens a
        breaker without trials)."""
        with self._lock:
            if self._current() is not State.HALF_OPEN:
                return  # a trial or a failure decided meanwhile
            if verdict is Verdict.UP:
                self._close()
            elif verdict is Verdict.DOWN and not self.trial:
                self._reopen()
            else:
                self._hint, self._hinted_at = verdict, self._clock()

    # --- admitting an entry ---------------------------------------------------------------------------
    def admit(self) -> Admit:
        """May an entry start now? PROBE reserves the half-open breaker's single trial slot."""
        with self._lock:
            state = self._current()
            if state is State.CLOSED:
                return Admit.ALLOW
            if state is State.HALF_OPEN and self._trial_free():
                self._probing = True
                return Admit.PROBE
            return Admit.DENY

    def abandon_probe(self) -> None:
        """The trial ended without using the dependency (or never started): another entry may be the trial."""
        with self._lock:
            self._probing = False

    # --- outcomes -------------------------------------------------------------------------------------
    def success(self, at: float | None = None) -> None:
        """The dependency answered. `at` (clock time of that use) older than the last opening is stale news
        from an entry that started before the outage and is ignored."""
        with self._lock:
            if at is not None and self._state is not State.CLOSED and at < self._opened_at:
                return
            self._close()

    def failure(self, entry: str, *, probe: bool = False) -> bool:
        """An entry failed because of the dependency. True if that is an outage: the entry then keeps its
        delivery budget. A failed trial (`probe`) is an outage unless the probe said up or could not tell."""
        with self._lock:
            state = self._current()
            if state is State.CLOSED:
                self._failing.add(entry)
                if len(self._failing) >= self.threshold:
                    self._open(self.open_seconds)
                    return True
                return False
            hint = self._hint
            if probe or state is State.HALF_OPEN:
                self._reopen()
            return not probe or hint not in (Verdict.UP, Verdict.UNKNOWN)

    def trip(self) -> None:
        """Open at once: the dependency itself says it is down (or the runtime cannot reach it)."""
        with self._lock:
            if self._current() is State.CLOSED:
                self._open(self.open_seconds)
            elif self._state is State.HALF_OPEN:
                self._reopen()

    def _open(self, seconds: float) -> None:
        self._state = State.OPEN
        self._opened_at = self._clock()
        self._open_for = seconds
        self._failing.clear()
        self._probing = False
        self._hint = None
        if self._since is None:
            self._since = self._opened_at
        self.opened += 1

    def _reopen(self) -> None:
        self._open(min(self._open_for * 2, self.max_open_seconds))

    def _close(self) -> None:
        self._state = State.CLOSED
        self._failing.clear()
        self._open_for = self.open_seconds
        self._probing = False
        self._hint = None
        self._since = None


@dataclass(frozen=True)
class Admission:
    """Permission for one entry to start; `probes` names the half-open breakers it probes."""

    probes: frozenset[str] = field(default_factory=frozenset)


class Breakers:
    """The breakers of one consumer runner, consulted together before an entry starts."""

    def __init__(self, names: Iterable[str], *, no_trial: Iterable[str] = (), **knobs: Any) -> None:
        without = set(no_trial)
        self.by_name = {name: CircuitBreaker(name, trial=name not in without, **knobs) for name in names}

    def admit(self) -> Admission | None:
        """None while any breaker is open (or half-open without a verdict, or with its trial taken)."""
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
        """Would `admit` let an entry start now (a trial included)?"""
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

    def open_ages(self) -> dict[str, float]:
        """Seconds each breaker that is not closed has been so."""
        ages = {name: b.open_age() for name, b in self.by_name.items()}
        return {name: round(age, 1) for name, age in ages.items() if age > 0}
