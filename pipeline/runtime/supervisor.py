"""One run_pipeline process: consumer runners, the outbox relay and housekeeping, started and stopped together."""

from __future__ import annotations

import logging
import threading
import time

from django.conf import settings

from pipeline import metrics
from pipeline.runtime.consumer import Consumer
from pipeline.runtime.runner import ConsumerRunner

log = logging.getLogger(__name__)


class Supervisor:
    def __init__(
        self,
        consumers: list[type[Consumer]],
        *,
        concurrency: int | None = None,
        relay: bool = True,
        housekeeping: bool = True,
        burst: bool = False,
        grace: float | None = None,
    ):
        self.burst = burst
        self.grace = settings.PIPELINE_GRACE_SECONDS if grace is None else grace
        self.runners = [ConsumerRunner(cls, concurrency=concurrency, burst=burst) for cls in consumers]
        self.relay = None
        if relay:
            from pipeline.relay import OutboxRelay

            self.relay = OutboxRelay()
        self.housekeeper = None
        if housekeeping and not burst:
            from pipeline.housekeeping import Housekeeper

            self.housekeeper = Housekeeper({cls.stream for cls in consumers})
        self.stop_requested = threading.Event()
        self._service_stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def request_stop(self) -> None:
        self.stop_requested.set()

    def run(self) -> None:
        """Run until request_stop() (a signal) or, with burst, until everything currently there is done."""
        for runner in self.runners:
            runner.start()
            metrics.RUNNING_CONSUMERS.labels(runner.stream, runner.group).set(1)
        if self.relay is not None:
            poll = 0.05 if self.burst else None
            self._spawn("relay", lambda: self.relay.run(self._service_stop, poll_seconds=poll))
        if self.housekeeper is not None:
            self._spawn("housekeeping", lambda: self.housekeeper.run(self._service_stop))
        try:
            if self.burst:
                self._wait_until_drained()
            else:
                while not self.stop_requested.wait(0.5):
                    pass
        finally:
            self.stop()

    def stop(self) -> None:
        log.info("stopping: no new reads; up to %.1fs for running handlers", self.grace)
        for runner in self.runners:
            runner.request_stop()
        self._service_stop.set()
        deadline = time.monotonic() + self.grace
        for runner in self.runners:
            runner.stop(max(0.0, deadline - time.monotonic()))
            metrics.RUNNING_CONSUMERS.labels(runner.stream, runner.group).set(0)
        for thread in self._threads:
            thread.join(5.0)
        log.info("stopped")

    def _spawn(self, name: str, target) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _snapshot(self) -> tuple | None:
        """Progress counters if every part looks idle, else None."""
        parts = []
        for runner in self.runners:
            if not runner.idle():
                return None
            parts.append((runner.activity, runner.empty_reads))
        if self.relay is not None:
            if self.relay.busy:
                return None
            parts.append((self.relay.activity, self.relay.empty_rounds))
        return tuple(parts)

    def _wait_until_drained(self) -> None:
        # Done when, between two idle looks, nothing made progress and every part completed another empty
        # round (a read, a relay drain) — so work one part handed to another is not missed.
        first = None
        while not self.stop_requested.is_set():
            time.sleep(0.05)
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
