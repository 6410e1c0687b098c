"""The stream runtime for one consumer (docs/delivery.md#runtime): at-least-once delivery for handlers with
exactly-once effects. `ConsumerRunner` wires the parts, each owning one concern, and runs their threads:

- pipeline.runtime.reading: the reader thread (XREADGROUP, never more than the idle workers; hostile entries
  given up, the rest handed on);
- pipeline.runtime.scheduling: one entry per subject at a time, in order; the work queue, retries waiting for
  their delay and entries paused by an open breaker;
- pipeline.runtime.handling: `concurrency` worker threads, and what each handler outcome becomes (ACK, retry,
  pause, final hook and dead letter);
- pipeline.runtime.acking: the acker thread (one ownership-checked ACK script call per batch);
- pipeline.runtime.leases: the keeper thread (heartbeats, due retries, XAUTOCLAIM of dead consumers' entries);
- pipeline.runtime.deliveries: the held entries and their delivery-count credits;
- pipeline.runtime.membership: the Redis client, scripts, consumer name and breakers they all share.
- pipeline.runtime.wiring: the bundle of shared parts handed to the reader, the handlers and the keeper.

A consumer that warms up (Consumer.warm_up) does so in a thread of its own; its reader and keeper, which claim
entries, start turning when it is over.

Each thread is a guarded loop (pipeline.runtime.loops): an exception is logged, counted and survived; a thread
that dies anyway is reported by dead_loops(), and the supervisor stops the process.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

import redis
from django.conf import settings

from eigenflux.base.redis import get_redis
from pipeline.runtime import dependencies, instruments
from pipeline.runtime.acking import Acker
from pipeline.runtime.breaker import Breakers
from pipeline.runtime.consumer import Consumer
from pipeline.runtime.deliveries import DeliveryCounts
from pipeline.runtime.handling import Handling
from pipeline.runtime.leases import Keeper
from pipeline.runtime.loops import Loops
from pipeline.runtime.membership import Membership, consumer_name
from pipeline.runtime.reading import Reader
from pipeline.runtime.scheduling import Scheduler
from pipeline.runtime.wiring import Shared

log = logging.getLogger(__name__)

_BREAKER_LEVEL = {"closed": 0, "half_open": 1, "open": 2}

__all__ = ["ConsumerRunner"]


def _breakers() -> Breakers:
    return Breakers(
        dependencies.names(),
        # Redis is the runtime's own path (reads, ACKs, leases): PING is the truth, and no entry could prove
        # more while it is away.
        no_trial=(dependencies.REDIS,),
        threshold=settings.PIPELINE_BREAKER_THRESHOLD,
        open_seconds=settings.PIPELINE_BREAKER_OPEN_SECONDS,
        max_open_seconds=max(settings.PIPELINE_BREAKER_MAX_OPEN_SECONDS, settings.PIPELINE_BREAKER_OPEN_SECONDS),
    )


class ConsumerRunner:
    def __init__(
        self,
        consumer_cls: type[Consumer],
        *,
        concurrency: int | None = None,
        burst: bool = False,
        client: redis.Redis | None = None,
    ):
        self.consumer = consumer_cls()
        self.stream = consumer_cls.stream
        self.group = consumer_cls.group
        self.name = consumer_name(consumer_cls.name)
        self.concurrency = concurrency or self.consumer.get_concurrency()
        self.batch_size = max(self.consumer.get_batch_size(), 1)
        self.capacity = max(self.batch_size, self.concurrency)
        self.lease_seconds = self.consumer.get_lease_seconds()
        self.policy = self.consumer.get_retry_policy()
        self.burst = burst
        # Capped below the shared client's 10 s socket timeout.
        self.block_ms = 100 if burst else min(settings.PIPELINE_BLOCK_MS, 5000)
        self.burst_retry_horizon = settings.PIPELINE_BURST_RETRY_HORIZON_SECONDS
        # Reader, acker and keeper turn at least this often; slower means stuck (handlers may take long).
        self.stall_seconds = max(30.0, 3 * self.block_ms / 1000, self.lease_seconds)
        self.client = client or get_redis(raw=True)
        self.breakers = _breakers()
        self.breaker_stuck_seconds = settings.PIPELINE_BREAKER_STUCK_SECONDS
        self._stuck_logged: set[str] = set()
        self.loops = Loops(self.name, on_error=self._loop_error)
        self.warmed = threading.Event()  # set once the consumer's warm-up is over (start())
        self._stopping = threading.Event()  # stop reading and starting handlers
        self._keeper_wake = threading.Event()
        self._worker_names: list[str] = []
        self._opened_seen: dict[str, int] = {}
        self._wire()
        for error_class in ("transient", "permanent"):  # exported at 0, so the first dead letter counts in increase()
            instruments.DEAD_LETTERS.labels(self.stream, self.group, error_class)

    def _wire(self) -> None:
        member = Membership(self.client, stream=self.stream, group=self.group, name=self.name, breakers=self.breakers)
        self.member = member
        self.scripts = member.scripts
        self.scheduler = Scheduler(concurrency=self.concurrency, capacity=self.capacity, wake_keeper=self._keeper_wake)
        self.counts = DeliveryCounts(member)
        self.acker = Acker(member, tick=lambda: self.loops.tick("acker"))
        shared = Shared(
            member,
            self.consumer,
            self.policy,
            self.scheduler,
            self.acker,
            self.counts,
            self._stopping,
            self._keeper_wake,
            self.lease_seconds,
        )
        max_waiting = settings.PIPELINE_MAX_WAITING_RETRIES
        self.handling = Handling(shared, max_waiting_retries=max_waiting, on_error=self._loop_error)
        self.reader = Reader(shared, batch_size=self.batch_size, block_ms=self.block_ms)
        self.keeper = Keeper(shared, lease_seconds=self.lease_seconds, take=self.reader.take, lost=self.handling.lost)

    # --- lifecycle -------------------------------------------------------------------------------------

    def ensure_group(self) -> None:
        self.member.ensure_group(self.consumer.start_id)

    def start(self) -> None:
        self.ensure_group()
        log.debug("consumer %s on %s/%s (concurrency %s)", self.name, self.stream, self.group, self.concurrency)
        self.warmed = warmed = self._start_warm_up()
        self.loops.start(
            "reader", self._after(warmed, "reader", lambda: self.reader.loop(lambda: self.loops.tick("reader")))
        )
        self.loops.start("acker", self.acker.loop)
        self.loops.start("keeper", self._after(warmed, "keeper", self._keep_loop))
        for i in range(self.concurrency):
            name = f"worker-{i}"
            self._worker_names.append(name)
            self.loops.start(name, lambda name=name: self._work_loop(name), watched=False)  # type: ignore[misc]

    def _start_warm_up(self) -> threading.Event:
        """The consumer's warm-up (Consumer.warm_up), in a thread of its own so that the process's other consumers
        and services start meanwhile; the event is set when it is over. A failure is logged and the consumer
        starts anyway (its first entries then load what they need)."""
        warmed = threading.Event()
        if type(self.consumer).warm_up is Consumer.warm_up:
            warmed.set()
            return warmed

        def warm_up() -> None:
            started = time.monotonic()
            try:
                self.consumer.warm_up()
                log.info("%s: warmed up in %.1f s; reading now", self.name, time.monotonic() - started)
            except Exception:
                log.exception("%s: warm-up failed; reading without it", self.name)
            finally:
                warmed.set()

        threading.Thread(target=warm_up, name=f"{self.name}-warm-up", daemon=True).start()
        return warmed

    def _after(self, warmed: threading.Event, name: str, body: Callable[[], None]) -> Callable[[], None]:
        """`body` once the warm-up is over (ticking meanwhile, so the loop does not look stalled); nothing if the
        runner stops first. The reader and the keeper wait: they are what claims entries."""

        def run() -> None:
            while not warmed.wait(0.2):
                if self._stopping.is_set():
                    return
                self.loops.tick(name)
            body()

        return run

    def _work_loop(self, name: str) -> None:
        self.handling.work_loop(name, lambda: self.loops.tick(name))

    def _keep_loop(self) -> None:
        self.keeper.loop(
            tick=lambda: self.loops.tick("keeper"),
            reclaim=self._reclaim,
            after_turn=self._export_breakers,
            workers_done=self._work_drained,
        )

    def _reclaim(self) -> None:
        """The keeper's reclaim step (a seam: tests inject keeper faults by overriding it)."""
        self.keeper.reclaim()

    def _work_drained(self) -> bool:
        return all(not self.loops.thread(name).is_alive() for name in self._worker_names)

    def request_stop(self) -> None:
        """Stop reading and starting handlers; running handlers finish (see stop())."""
        self._stopping.set()
        self._keeper_wake.set()
        with self.scheduler.room:
            self.scheduler.room.notify_all()

    def stop(self, grace: float) -> None:
        """Graceful stop: wait up to `grace` s for running handlers, then cancel them; entries not finished
        stay pending in the group for another process to reclaim (nothing is lost), with the deliveries they
        did not use given back."""
        self.request_stop()
        workers = [self.loops.thread(name) for name in self._worker_names]
        self.scheduler.stop_workers(len(workers))
        deadline = time.monotonic() + grace
        for worker in workers:
            worker.join(max(0.0, deadline - time.monotonic()))
        if any(w.is_alive() for w in workers):
            log.warning("%s: handlers still running after %.1fs grace; cancelling them", self.name, grace)
            with self.scheduler.lock:
                for delivery in self.scheduler.held.values():
                    delivery.lease.cancelled.set()
            for worker in workers:
                worker.join(2.0)
        self.acker.stop()
        self._keeper_wake.set()  # workers are done: let the keeper see it now
        for name in ("reader", "acker", "keeper"):
            self.loops.thread(name).join(max(2.0, self.block_ms / 1000 + 1))
        self.counts.give_back(self.scheduler.all_held())
        if self.scheduler.held:
            log.info("%s: %d entries left pending for reclaim", self.name, len(self.scheduler.held))

    # --- what the supervisor and the health page look at -------------------------------------------------

    @property
    def activity(self) -> int:
        """For --burst: a progress counter (reads, reclaims, entries let go) the supervisor compares between
        two looks."""
        return self.reader.reads + self.keeper.reclaims + self.scheduler.released

    @property
    def empty_reads(self) -> int:
        return self.reader.empty_reads

    def idle(self) -> bool:
        """Nothing held except retries due later than the burst horizon, nothing left to ACK, and (in burst
        mode) the entries of crashed consumers looked for once."""
        if self.burst and not self.keeper.scanned:
            return False
        horizon = time.monotonic() + self.burst_retry_horizon
        return self.scheduler.idle(horizon) and self.acker.idle()

    def dead_loops(self) -> list[str]:
        """Loop threads that died while the runner was meant to be running."""
        return [] if self._stopping.is_set() else self.loops.dead()

    def status(self) -> dict[str, Any]:
        """For the liveness registry, the health page and the process's readiness probe."""
        loops = self.loops.statuses()
        return {
            "consumer": self.name,
            "name": self.consumer.name,
            "stream": self.stream,
            "group": self.group,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "healthy": all(loop.healthy(self.stall_seconds) for loop in loops),
            "loops": [asdict(loop) for loop in loops],
            "stall_seconds": self.stall_seconds,
            "breakers": self.breakers.states(),
            "breakers_open_seconds": self.breakers.open_ages(),
            "breaker_stuck_seconds": self.breaker_stuck_seconds,
            **self.scheduler.counts(),
        }

    def _log_stuck(self, name: str, age: float) -> None:
        """Once per opening: the breaker has stayed open past the bound (then the health page, /readyz and the
        alert say so too)."""
        if age < self.breaker_stuck_seconds:
            self._stuck_logged.discard(name)
        elif name not in self._stuck_logged:
            self._stuck_logged.add(name)
            log.warning(
                "%s: %s breaker open for %.0fs (PIPELINE_BREAKER_STUCK_SECONDS %.0f); probe says %s",
                self.name,
                name,
                age,
                self.breaker_stuck_seconds,
                self.breakers.by_name[name].hint or "nothing yet",
            )

    def _loop_error(self, loop: str) -> None:
        instruments.LOOP_ERRORS.labels(self.stream, self.group, "worker" if loop.startswith("worker") else loop).inc()

    def _export_breakers(self) -> None:
        for name, breaker in self.breakers.by_name.items():
            labels = (self.stream, self.group, name)
            instruments.BREAKER_STATE.labels(*labels).set(_BREAKER_LEVEL[str(breaker.state)])
            age = breaker.open_age()
            instruments.BREAKER_OPEN_SECONDS.labels(*labels).set(age)
            instruments.BREAKER_OPEN_LIMIT.labels(*labels).set(self.breaker_stuck_seconds)
            self._log_stuck(name, age)
            opened = breaker.opened - self._opened_seen.get(name, 0)
            if opened:
                instruments.BREAKER_OPENED.labels(self.stream, self.group, name).inc(opened)
                self._opened_seen[name] = breaker.opened
