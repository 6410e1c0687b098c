"""One run_pipeline process: consumer runners and the services the application hands in (its outbox relay and
housekeeping, see pipeline.services), started and stopped together.

The supervisor also watches them: every consumer's loops are reported to the liveness registry (read by the
admin's health page) and answer the process's readiness probe; a loop or service thread that died makes the
whole process stop with a non-zero status, so whatever supervises it restarts it.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import redis
from django.conf import settings

from eigenflux.base.redis import get_redis
from pipeline.runtime import instruments, liveness
from pipeline.runtime.consumer import Consumer
from pipeline.runtime.runner import ConsumerRunner

log = logging.getLogger(__name__)

EXIT_LOOP_DIED = 70  # EX_SOFTWARE


class Service(Protocol):
    """A loop that runs beside the consumers, in a thread of its own, until `stop` is set (the application's
    outbox relay, its housekeeping). A service thread that dies stops the process, like a consumer loop."""

    name: str

    def run(self, stop: threading.Event) -> None: ...


@runtime_checkable
class Drainable(Protocol):
    """A service a --burst run waits for: None while it works, else (progress count, empty rounds)."""

    def drain_state(self) -> tuple[int, int] | None: ...


class Supervisor:
    def __init__(
        self,
        consumers: list[type[Consumer]],
        *,
        services: Sequence[Service] = (),
        concurrency: int | None = None,
        burst: bool = False,
        grace: float | None = None,
    ):
        self.burst = burst
        self.grace = settings.PIPELINE_GRACE_SECONDS if grace is None else grace
        self.runners = [ConsumerRunner(cls, concurrency=concurrency, burst=burst) for cls in consumers]
        self.services = list(services)
        self.stop_requested = threading.Event()
        self.exit_status = 0
        self.failure = ""
        self._service_stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._reported_at = 0.0
        self._started: list[ConsumerRunner] = []  # what stop() stops: a runner that never started has no loops

    def request_stop(self) -> None:
        self.stop_requested.set()

    def run(self) -> int:
        """Run until request_stop() (a signal) or, with burst, until everything currently there is done.
        Returns the process's exit status: 0, or EXIT_LOOP_DIED when a loop died. If a consumer cannot start
        (its group cannot be created), those already started are stopped before the error is raised."""
        try:
            for runner in self.runners:
                runner.start()
                self._started.append(runner)
                instruments.RUNNING_CONSUMERS.labels(runner.stream, runner.group).set(1)
            for service in self.services:
                self._spawn(service.name, functools.partial(service.run, self._service_stop))
            concurrency = sorted({runner.concurrency for runner in self._started})
            log.info(
                "%d consumers started (concurrency %s): %s",
                len(self._started),
                ", ".join(map(str, concurrency)),
                ", ".join(runner.consumer.name for runner in self._started),
            )
            if self.burst:
                self._wait_until_drained()
            else:
                while not self.stop_requested.wait(0.5):
                    if self._died():
                        break
                    self._report()
        finally:
            self.stop()
        return self.exit_status

    def stop(self) -> None:
        log.info("stopping: no new reads; up to %.1fs for running handlers", self.grace)
        for runner in self._started:
            runner.request_stop()
        self._service_stop.set()
        deadline = time.monotonic() + self.grace
        for runner in self._started:
            runner.stop(max(0.0, deadline - time.monotonic()))
            instruments.RUNNING_CONSUMERS.labels(runner.stream, runner.group).set(0)
        for thread in self._threads:
            thread.join(5.0)
        try:
            liveness.withdraw(get_redis(), [runner.name for runner in self.runners])
        except redis.RedisError:
            log.warning("could not withdraw from the liveness registry; the entries expire by themselves")
        log.info("stopped")

    # --- watching -------------------------------------------------------------------------------------------

    def statuses(self) -> list[dict[str, Any]]:
        return [runner.status() for runner in self.runners]

    def probe(self) -> tuple[bool, dict[str, Any]]:
        """Readiness of this process: every loop of every consumer alive and turning, every service alive, no
        breaker open past PIPELINE_BREAKER_STUCK_SECONDS."""
        consumers = []
        for status in self.statuses():
            problems = [
                f"{loop['name']} dead" if not loop["alive"] else f"{loop['name']} stalled {loop['idle_seconds']:.0f}s"
                for loop in status["loops"]
                if not loop["alive"] or (loop["watched"] and loop["idle_seconds"] > status["stall_seconds"])
            ]
            problems += liveness.stuck_problems(status)
            consumers.append({"consumer": status["consumer"], "problems": problems, "breakers": status["breakers"]})
        services = {name: thread.is_alive() for name, thread in self._named_threads().items()}
        ready = not self.failure and all(services.values()) and not any(c["problems"] for c in consumers)
        body = {"status": "ok" if ready else "unavailable", "failure": self.failure, "services": services}
        # Ready meanwhile (every loop turns), but not yet claiming: `make run` waits for this list to empty.
        warming = [runner.consumer.name for runner in self._started if not runner.warmed.is_set()]
        return ready, {**body, "warming_up": warming, "consumers": consumers}

    def _named_threads(self) -> dict[str, threading.Thread]:
        return {thread.name: thread for thread in self._threads}

    def _died(self) -> bool:
        """A loop or service thread died while meant to be running: log it and ask for a non-zero exit."""
        dead = [
            f"{runner.consumer.name}: {', '.join(names)}" for runner in self.runners if (names := runner.dead_loops())
        ]
        if not self._service_stop.is_set():
            dead += [f"service {name}" for name, thread in self._named_threads().items() if not thread.is_alive()]
        if not dead:
            return False
        self.failure = "loop thread died: " + "; ".join(dead)
        self.exit_status = EXIT_LOOP_DIED
        log.critical("%s; stopping this process so that its supervisor restarts it", self.failure)
        return True

    def _report(self) -> None:
        now = time.monotonic()
        if now - self._reported_at < liveness.REPORT_EVERY_SECONDS:
            return
        self._reported_at = now
        try:
            liveness.publish(get_redis(), self.statuses())
        except redis.RedisError as exc:
            log.warning("liveness report failed: %s", exc)

    def _spawn(self, name: str, target: Callable[[], object]) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _snapshot(self) -> tuple[tuple[int, int], ...] | None:
        """Progress counters if every part looks idle, else None."""
        parts = []
        for runner in self.runners:
            if not runner.idle():
                return None
            parts.append((runner.activity, runner.empty_reads))
        for service in self.services:
            if isinstance(service, Drainable):
                state = service.drain_state()
                if state is None:
                    return None
                parts.append(state)
        return tuple(parts)

    def _wait_until_drained(self) -> None:
        # Done when, between two idle looks, nothing made progress and every part completed another empty
        # round (a read, a relay drain) — so work one part handed to another is not missed.
        first = None
        while not self.stop_requested.is_set():
            time.sleep(0.05)
            if self._died():
                return
            snap = self._snapshot()
            if snap is None:
                first = None
                continue
            if first is None:
                first = snap
                continue
            progressed = any(a[0] != b[0] for a, b in zip(first, snap, strict=True))
            if progressed:
                first = snap
                continue
            if all(b[1] > a[1] for a, b in zip(first, snap, strict=True)):
                return
