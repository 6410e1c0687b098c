"""The stream runtime for one consumer (docs/delivery.md#runtime): read, dispatch per subject to a worker pool, keep
leases, retry, reclaim, ACK in batches and dead-letter — at-least-once delivery for handlers with exactly-once effects.

Threads per consumer (each a guarded loop, pipeline.runtime.loops): a reader (blocking XREADGROUP),
`concurrency` workers, an acker (one ownership-checked ACK script call per batch of finished entries) and a
keeper (heartbeats, due retries, XAUTOCLAIM, resuming entries paused by a circuit breaker).

Entries are read as raw bytes and decoded one by one (pipeline.runtime.entries): an entry that is not UTF-8
is malformed, dead-lettered with its bytes in base64, and the entries around it are handled as usual.

Delivery counts say how many attempts started
---------------------------------------------
Redis counts a delivery whenever XREADGROUP, XAUTOCLAIM or XCLAIM hands an entry out, whether or not a handler
ever runs on it; the count decides when an entry is given up. The runtime keeps it equal to the attempts that
really started, by tracking each held entry's unspent deliveries (`Delivery.credit`):
- a read never takes more entries than there are idle handler threads, so what is read starts at once;
- an entry that waits instead — behind an entry of the same subject, paused by an open circuit breaker, or
  still queued at a graceful stop — gives its unspent delivery back (XCLAIM … RETRYCOUNT n-1 JUSTID, owner-
  checked in Lua) and spends one again (RETRYCOUNT n+1) only when it really starts;
- an attempt that failed only because a dependency is down (its breaker open) is refunded the same way.
So prefetching, crashes, reclaims and outages cost an entry nothing; only handler runs do. The count stays in
the one place the runtime already trusts, the group's pending list, changed atomically with the ownership
check; the common path (read, then started at once) costs no extra round trip. The one case left over is a
process killed in the microseconds between reading an entry and starting its handler: that entry is
charged one delivery it did not use.
"""

from __future__ import annotations

import contextlib
import heapq
import logging
import os
import queue
import socket
import threading
import time
import uuid
from collections import deque
from dataclasses import asdict, dataclass
from typing import Any

import redis
from django.conf import settings
from django.db import close_old_connections, connection

from eigenflux import tracing
from eigenflux.dbpool import pool_exhausted, release_connection
from eigenflux.redis import get_redis
from pipeline import metrics
from pipeline.runtime import dependencies
from pipeline.runtime.breaker import Admission, Admit, Breakers, State
from pipeline.runtime.consumer import Consumer
from pipeline.runtime.deadletter import GiveUp, dead_letter, letter_payload
from pipeline.runtime.entries import RawFields, UndecodableEntry, decode_fields, id_key, lenient_fields, text
from pipeline.runtime.errors import DeadLetterNow, LeaseLost, NothingToDo, RetryLater
from pipeline.runtime.event import Event, Lease, MalformedEntry
from pipeline.runtime.logcontext import delivery_log_context
from pipeline.runtime.loops import Loops
from pipeline.runtime.scripts import Scripts

log = logging.getLogger(__name__)

_STOP = object()
_OUTCOMES = ("acked", "nothing_to_do", "retried", "dead_lettered", "lease_lost", "released", "paused")
_BREAKER_LEVEL = {"closed": 0, "half_open": 1, "open": 2}


def consumer_name(name: str) -> str:
    """Unique per process lifetime, so a restarted process never inherits a dead one's entries by accident."""
    return f"{name}-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


@dataclass(eq=False)
class Delivery:
    """One pending entry held by this process."""

    message_id: str
    raw: RawFields
    fields: dict[str, str] | None  # None: not UTF-8
    delivery_count: int  # as Redis counts it (we own the entry, so nobody else changes it)
    event: Event | None  # None: malformed
    subject: str
    lease: Lease
    credit: int = 1  # deliveries in the count that no attempt has used yet (see the module docstring)
    verdict: GiveUp | None = None  # set once the runtime gives up: the final hook and the dead letter follow
    hook_done: bool = False
    hook_failures: int = 0
    retry_at: float | None = None  # set while it waits for a retry (its subject stays busy meanwhile)


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
        self.max_waiting_retries = settings.PIPELINE_MAX_WAITING_RETRIES
        # Reader, acker and keeper turn at least this often; slower means stuck (handlers may take long).
        self.stall_seconds = max(30.0, 3 * self.block_ms / 1000, self.lease_seconds)
        self.client = client or get_redis(raw=True)
        self.scripts = Scripts(self.client)
        self.breakers = Breakers(
            dependencies.DEPENDENCIES,
            threshold=settings.PIPELINE_BREAKER_THRESHOLD,
            open_seconds=settings.PIPELINE_BREAKER_OPEN_SECONDS,
            max_open_seconds=max(settings.PIPELINE_BREAKER_MAX_OPEN_SECONDS, settings.PIPELINE_BREAKER_OPEN_SECONDS),
        )
        self.loops = Loops(self.name, on_error=self._loop_error)

        self._lock = threading.Lock()
        self._room = threading.Condition(self._lock)  # signalled when held entries finish
        self._held: dict[str, Delivery] = {}  # every entry this process owns: queued, running, waiting or paused
        self._busy_subjects: set[str] = set()
        self._subject_queues: dict[str, deque[Delivery]] = {}
        self._retry_heap: list[tuple[float, int, Delivery]] = []
        self._retry_seq = 0
        self._blocked: deque[Delivery] = deque()  # paused by an open circuit breaker, credits returned
        self._left: list[Delivery] = []  # not started because of a stop: their credits go back at the end
        self._work: queue.SimpleQueue[Any] = queue.SimpleQueue()  # deliveries, or the _STOP sentinel
        self._acks: queue.SimpleQueue[Any] = queue.SimpleQueue()  # message ids, or the _STOP sentinel
        self._keeper_wake = threading.Event()
        self._stopping = threading.Event()  # stop reading and starting handlers
        self._dispatched = 0  # on the work queue or in a worker
        self._running = 0
        self._acking = 0
        self._reclaim_cursor = "0-0"
        self._worker_names: list[str] = []
        self._opened_seen: dict[str, int] = {}
        # For --burst: progress counters the supervisor compares between two looks.
        self.activity = 0
        self.empty_reads = 0

        labels = (self.stream, self.group)
        self._m = {outcome: metrics.MESSAGES.labels(*labels, outcome) for outcome in _OUTCOMES}
        self._m_seconds = metrics.HANDLE_SECONDS.labels(*labels)
        self._m_retries = metrics.RETRIES.labels(*labels)
        self._m_reclaimed = metrics.RECLAIMED.labels(*labels)
        self._m_lease_lost = metrics.LEASE_LOSSES.labels(*labels)
        for error_class in ("transient", "permanent"):  # exported at 0, so the first dead letter counts in increase()
            metrics.DEAD_LETTERS.labels(*labels, error_class)

    # --- lifecycle -------------------------------------------------------------------------------------

    def ensure_group(self) -> None:
        try:
            self.client.xgroup_create(self.stream, self.group, id=self.consumer.start_id, mkstream=True)
        except redis.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    def start(self) -> None:
        self.ensure_group()
        log.info("consumer %s on %s/%s (concurrency %s)", self.name, self.stream, self.group, self.concurrency)
        self.loops.start("reader", self._read_loop)
        self.loops.start("acker", self._ack_loop)
        self.loops.start("keeper", self._keep_loop)
        for i in range(self.concurrency):
            name = f"worker-{i}"
            self._worker_names.append(name)
            self.loops.start(name, lambda name=name: self._work_loop(name), watched=False)  # type: ignore[misc]

    def request_stop(self) -> None:
        """Stop reading and starting handlers; running handlers finish (see stop())."""
        self._stopping.set()
        self._keeper_wake.set()
        with self._room:
            self._room.notify_all()

    def stop(self, grace: float) -> None:
        """Graceful stop: wait up to `grace` s for running handlers, then cancel them; entries not finished
        stay pending in the group for another process to reclaim (nothing is lost), with the deliveries they
        did not use given back."""
        self.request_stop()
        workers = [self.loops.thread(name) for name in self._worker_names]
        for _ in workers:
            self._work.put(_STOP)
        deadline = time.monotonic() + grace
        for worker in workers:
            worker.join(max(0.0, deadline - time.monotonic()))
        if any(w.is_alive() for w in workers):
            log.warning("%s: handlers still running after %.1fs grace; cancelling them", self.name, grace)
            with self._lock:
                for delivery in self._held.values():
                    delivery.lease.cancelled.set()
            for worker in workers:
                worker.join(2.0)
        self._acks.put(_STOP)
        self._keeper_wake.set()  # workers are done: let the keeper see it now
        for name in ("reader", "acker", "keeper"):
            self.loops.thread(name).join(max(2.0, self.block_ms / 1000 + 1))
        with self._lock:
            left = [*self._held.values(), *self._left]
        self._return_credits(left)
        if self._held:
            log.info("%s: %d entries left pending for reclaim", self.name, len(self._held))

    def idle(self) -> bool:
        """Nothing held except retries due later than the burst horizon, nothing left to ACK."""
        horizon = time.monotonic() + self.burst_retry_horizon
        with self._lock:
            for delivery in self._held.values():
                if delivery.retry_at is None or delivery.retry_at <= horizon:
                    return False
        return self._acks.empty() and self._running == 0 and self._acking == 0

    def dead_loops(self) -> list[str]:
        """Loop threads that died while the runner was meant to be running."""
        return [] if self._stopping.is_set() else self.loops.dead()

    def status(self) -> dict[str, Any]:
        """For the liveness registry, the health page and the process's readiness probe."""
        loops = self.loops.statuses()
        with self._lock:
            held, blocked, retrying = len(self._held), len(self._blocked), len(self._retry_heap)
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
            "held": held,
            "running": self._running,
            "blocked": blocked,
            "retrying": retrying,
        }

    # --- reading and dispatch -----------------------------------------------------------------------------

    def _read_loop(self) -> None:
        try:
            self._read_until_stopped()
        finally:
            connection.close()  # opened only to probe PostgreSQL during an outage

    def _read_until_stopped(self) -> None:
        while not self._stopping.is_set():
            self.loops.tick("reader")
            room = self._read_room()
            if room <= 0 or self._stopping.is_set():
                continue
            try:
                response: Any = self.client.xreadgroup(
                    self.group, self.name, {self.stream: ">"}, count=room, block=self.block_ms
                )
            except redis.ResponseError as exc:
                if "NOGROUP" in str(exc):
                    self._recreate_group()
                    continue
                log.exception("%s: XREADGROUP failed", self.name)
                self._stopping.wait(1.0)
                continue
            except redis.RedisError as exc:
                self._redis_down(exc, "XREADGROUP")
                self._stopping.wait(1.0)
                continue
            self._redis_up()
            entries = response[0][1] if response else []
            if not entries:
                self.empty_reads += 1
                continue
            self.activity += 1
            parked: list[Delivery] = []
            for message_id, raw in entries:
                self._accept_safely(text(message_id), raw, 1, parked)
            self._return_credits(parked)

    def _read_room(self) -> int:
        """How many entries a read may take now: never more than idle handler threads, so each starts at once.
        While a breaker is not closed, none: the reader, idle anyway, probes the dependency instead."""
        if not self.breakers.all_closed():
            self._probe_dependencies()
        with self._room:
            room = 0
            if self.breakers.all_closed():
                active = len(self._held) - len(self._retry_heap)
                room = min(self.concurrency - self._dispatched, self.capacity - active, self.batch_size)
            if room <= 0:
                self._room.wait(0.5)
            return max(room, 0)

    def _probe_dependencies(self) -> None:
        """Half-open breakers are probed directly (SELECT 1, PING, GET /models), not with an entry."""
        for name, breaker in self.breakers.by_name.items():
            if breaker.admit() is not Admit.PROBE:
                continue
            if dependencies.is_up(name):
                log.info("%s: %s is back; resuming", self.name, name)
                breaker.success()
                self._keeper_wake.set()
            else:
                breaker.failure("probe", probe=True)

    def _confirm_outage(self, dependency: str | None, outage: bool) -> bool:
        """A failure blamed on a dependency whose breaker is still closed: ask the dependency itself. Down for
        everyone means an outage (the entry keeps its delivery); up means the failure is the entry's own."""
        if dependency is None or outage:
            return outage
        if dependencies.is_up(dependency):
            return False
        self.breakers.by_name[dependency].trip()
        return True

    def _recreate_group(self) -> None:
        try:
            self.ensure_group()
        except redis.RedisError:
            log.exception("%s: cannot create group", self.name)
            self._stopping.wait(1.0)

    def _accept_safely(self, message_id: str, raw: RawFields | None, count: int, parked: list[Delivery]) -> None:
        """Hostile input must never stop the loop: anything unexpected dead-letters the entry."""
        try:
            self._accept(message_id, raw, count, parked)
        except Exception as exc:
            log.exception("%s: cannot dispatch %s", self.name, message_id)
            self._enqueue(self._malformed(message_id, raw or {}, count, f"undispatchable: {_text(exc)}"), parked)

    def _accept(self, message_id: str, raw: RawFields | None, count: int, parked: list[Delivery]) -> None:
        """Take an entry this process now owns: queue it for a handler, or (malformed, or over its deliveries)
        for the final hook and the dead letter."""
        if not raw:
            # Deleted from the stream while pending (trimmed): there is nothing to handle.
            self._acks.put(message_id)
            return
        try:
            fields = decode_fields(raw)
        except UndecodableEntry as exc:
            log.warning("%s: undecodable entry %s: %s", self.name, message_id, exc)
            self._enqueue(self._malformed(message_id, raw, count, f"malformed: {exc}"), parked)
            return
        lease = Lease(verify=lambda: self._owns(message_id))
        try:
            event = self.consumer.parse(
                stream=self.stream,
                group=self.group,
                message_id=message_id,
                fields=fields,
                delivery_count=count,
                lease=lease,
            )
        except MalformedEntry as exc:
            log.warning("%s: malformed entry %s: %s", self.name, message_id, exc)
            self._enqueue(self._malformed(message_id, raw, count, f"malformed: {exc}", fields), parked)
            return
        target = fields.get("targetgroup")
        if target and target != self.group:
            # A replay meant for another group of this stream (e.g. a requeued dead letter): not ours.
            self._acks.put(message_id)
            return
        delivery = Delivery(message_id, raw, fields, count, event, event.subject, lease)
        if self.policy.exhausted(count):
            error = f"started {count - 1} times without finishing (each handler died or lost its lease)"
            delivery.verdict = self._reason(delivery, "transient", error)
        self._enqueue(delivery, parked)

    def _malformed(
        self, message_id: str, raw: RawFields, count: int, error: str, fields: dict[str, str] | None = None
    ) -> Delivery:
        # A subject of its own: a malformed entry waits for nothing and holds nothing up.
        delivery = Delivery(
            message_id, raw, fields, count, None, f"\x00{message_id}", Lease(verify=lambda: self._owns(message_id))
        )
        delivery.verdict = self._reason(delivery, "permanent", error)
        return delivery

    def _reason(self, delivery: Delivery, error_class: str, error: str) -> GiveUp:
        return GiveUp(
            stream=self.stream,
            group=self.group,
            message_id=delivery.message_id,
            error_class=error_class,
            error=error,
            delivery_count=delivery.delivery_count,
            fields=delivery.fields if delivery.fields is not None else lenient_fields(delivery.raw),
            payload=letter_payload(delivery.fields, delivery.raw),
        )

    def _enqueue(self, delivery: Delivery, parked: list[Delivery]) -> None:
        """Hold the entry; start it unless an entry of its subject is ahead of it (then it waits, parked)."""
        with self._lock:
            self._held[delivery.message_id] = delivery
            if delivery.subject in self._busy_subjects:
                self._subject_queues.setdefault(delivery.subject, deque()).append(delivery)
                parked.append(delivery)
                return
            self._busy_subjects.add(delivery.subject)
        self._dispatch(delivery)

    def _dispatch(self, delivery: Delivery) -> None:
        with self._lock:
            self._dispatched += 1
        self._work.put(delivery)

    def _release(self, delivery: Delivery) -> None:
        """Forget an entry and hand its subject to the next queued entry of that subject."""
        with self._room:
            self._held.pop(delivery.message_id, None)
            self.activity += 1
            pending = self._subject_queues.get(delivery.subject)
            nxt = None
            while pending:
                nxt = pending.popleft()
                if nxt.message_id in self._held:
                    break
                nxt = None
            if pending is not None and not pending:
                del self._subject_queues[delivery.subject]
            if nxt is None:
                self._busy_subjects.discard(delivery.subject)
            self._room.notify_all()
        if nxt is not None:
            self._dispatch(nxt)

    def _forget(self, delivery: Delivery) -> None:
        with self._room:
            self._held.pop(delivery.message_id, None)
            self._subject_queues.pop(delivery.subject, None)
            self._busy_subjects.discard(delivery.subject)
            self._left.append(delivery)
            self._room.notify_all()

    # --- delivery counts --------------------------------------------------------------------------------------

    def _set_counts(self, changes: list[tuple[Delivery, int]]) -> bool:
        """Set owned entries' delivery counts (one script call). False if Redis could not be reached."""
        if not changes:
            return True
        args: list[str | int] = [self.group, self.name]
        for delivery, count in changes:
            args += [delivery.message_id, max(0, count)]
        try:
            lost = {text(mid) for mid in self.scripts.set_count(keys=[self.stream], args=args)}
        except redis.RedisError as exc:
            self._redis_down(exc, "setting delivery counts")
            return False
        for delivery, count in changes:
            if delivery.message_id in lost:
                delivery.lease.lose()
            else:
                delivery.delivery_count = max(0, count)
        return True

    def _return_credits(self, deliveries: list[Delivery]) -> None:
        """Give back the deliveries these entries hold without having used them."""
        owing = [d for d in deliveries if d.credit > 0]
        if self._set_counts([(d, d.delivery_count - d.credit) for d in owing]):
            for delivery in owing:
                delivery.credit = 0

    def _spend(self, delivery: Delivery) -> bool:
        """Make sure the count includes the attempt about to start. False if that cannot be recorded."""
        if delivery.credit > 0:
            return True
        if not self._set_counts([(delivery, delivery.delivery_count + 1)]):
            return False
        if delivery.lease.lost:
            return False
        delivery.credit = 1
        return True

    # --- handling ------------------------------------------------------------------------------------------

    def _work_loop(self, name: str) -> None:
        try:
            while True:
                self.loops.tick(name)
                try:
                    delivery = self._work.get(timeout=1.0)
                except queue.Empty:
                    continue
                if delivery is _STOP:
                    return
                try:
                    # Every line logged while handling (the handler's and the runtime's) carries the delivery's ids.
                    with self._log_context(delivery):
                        self._run(delivery)
                except Exception:
                    # A runtime fault on this entry (not the handler's: _handle catches those): the entry is
                    # let go, stays pending and is reclaimed after the lease; this thread carries on.
                    log.exception("%s: runtime error on %s; leaving it for reclaim", self.name, delivery.message_id)
                    self._loop_error(name)
                    self._release(delivery)
                finally:
                    with self._room:
                        self._dispatched -= 1
                        self._room.notify_all()
        finally:
            connection.close()

    def _log_context(self, delivery: Delivery) -> contextlib.AbstractContextManager[object]:
        if delivery.event is None:
            return contextlib.nullcontext()
        return delivery_log_context(delivery.event, consumer=self.name, delivery_count=delivery.delivery_count)

    def _run(self, delivery: Delivery) -> None:
        if self._stopping.is_set():
            # Not started: leave it pending (another process reclaims it after the lease timeout).
            self._m["released"].inc()
            self._forget(delivery)
            return
        if delivery.lease.cancelled.is_set():
            self._lost(delivery)
            return
        admission = self.breakers.admit()
        if admission is None:
            self._block(delivery)
            return
        if delivery.verdict is not None:
            self._finish_give_up(delivery, admission)
            return
        if not self._spend(delivery):
            self.breakers.release(admission)
            if delivery.lease.lost:
                self._lost(delivery)
            else:
                self._block(delivery)
            return
        with self._lock:
            self._running += 1
        try:
            self._handle(delivery, admission)
        finally:
            with self._lock:
                self._running -= 1

    def _handle(self, delivery: Delivery, admission: Admission) -> None:
        event, subject = delivery.event, delivery.subject
        assert event is not None  # a malformed entry gets its verdict when read and never reaches a handler
        event.delivery_count = delivery.delivery_count
        delivery.credit -= 1  # this attempt uses its delivery
        close_old_connections()
        started = time.perf_counter()
        error: Exception | None
        outcome, error = "acked", None
        with dependencies.observing() as uses:
            try:
                with tracing.handling_span(event, consumer=self.name, delivery_count=delivery.delivery_count):
                    self.consumer.handle(event)
            except NothingToDo:
                outcome = "nothing_to_do"
            except LeaseLost:
                # Lost ownership, or cancelled by a hard shutdown (then the entry is merely left pending).
                outcome = "lease_lost" if delivery.lease.lost else "released"
            except DeadLetterNow as exc:
                outcome, error = "permanent", exc
            except RetryLater as exc:
                outcome, error = "transient", exc
            except Exception as exc:
                # Unexpected: treated as transient, retried, then dead-lettered for a person to look at. A
                # dependency going away is not unexpected: one line, the breaker takes it from there.
                if dependencies.dependency_of(exc) is None:
                    log.exception("%s: handler failed on %s (subject %s)", self.name, delivery.message_id, subject)
                else:
                    log.warning("%s: handler failed on %s: %s", self.name, delivery.message_id, _text(exc)[:300])
                outcome, error = "transient", exc
            finally:
                # The connection goes back to the process's pool: threads hold one only while they use it.
                release_connection()
                self._m_seconds.observe(time.perf_counter() - started)
        if delivery.lease.lost:
            outcome = "lease_lost"
        elif outcome == "transient" and pool_exhausted(error) and dependencies.postgres_answers_directly():
            # No free connection in this process's pool while PostgreSQL itself answers: not an outage.
            outcome = "no_connection"
        failed = dependencies.dependency_of(error) if outcome == "transient" else None
        outage = self.breakers.settle(admission, entry=delivery.message_id, ok=uses.ok, failed_dependency=failed)
        outage = self._confirm_outage(failed, outage)
        if outcome in ("acked", "nothing_to_do"):
            self._m[outcome].inc()
            self._acks.put(delivery.message_id)
            self._release(delivery)
        elif outcome == "lease_lost":
            self._lost(delivery)
        elif outcome == "released":
            self._m["released"].inc()
            self._release(delivery)
        elif outcome == "no_connection":
            # This process had no free database connection: not the entry's fault, so it runs again shortly
            # without counting a delivery (and never dead-letters for it).
            self._m["retried"].inc()
            delivery.credit += 1
            self._later(delivery, 1.0)
        elif outcome == "permanent":
            delivery.verdict = self._reason(delivery, "permanent", _text(error))
            self._finish_give_up(delivery, None)
        elif outage:
            # The dependency is down for everyone: this attempt does not count, the entry waits for it.
            log.warning(
                "%s: %s is down; %s (subject %s) paused without spending a delivery: %s",
                self.name,
                failed,
                delivery.message_id,
                delivery.subject,
                _text(error),
            )
            self._m["paused"].inc()
            delivery.credit += 1
            self._block(delivery)
        else:
            self._retry_or_give_up(delivery, error)

    def _retry_or_give_up(self, delivery: Delivery, error: BaseException | None) -> None:
        delay = self.policy.next_delay(delivery.delivery_count, error)
        if delay is None:
            delivery.verdict = self._reason(delivery, "transient", _text(error))
            self._finish_give_up(delivery, None)
            return
        if self._stopping.is_set():
            self._m["released"].inc()
            self._release(delivery)
            return
        if not self._later(delivery, delay, cap=self.max_waiting_retries):
            # The retry backlog in memory is capped: the entry is let go (still pending, its count right) and
            # whichever process reclaims it after the lease timeout retries it.
            log.warning(
                "%s: %d retries waiting; %s left for reclaim", self.name, len(self._retry_heap), delivery.message_id
            )
            self._m["released"].inc()
            self._release(delivery)
            return
        self._m["retried"].inc()
        self._m_retries.inc()
        log.info(
            "%s: retrying %s (subject %s, delivery %d) in %.2fs: %s",
            self.name,
            delivery.message_id,
            delivery.subject,
            delivery.delivery_count,
            delay,
            _text(error),
        )

    def _later(self, delivery: Delivery, delay: float, cap: int | None = None) -> bool:
        """Hold the entry for `delay` seconds; with `cap`, only while fewer than `cap` are held (checked and taken
        under one lock, so that concurrent handlers cannot overshoot it). False: not held."""
        with self._lock:
            if cap is not None and len(self._retry_heap) >= cap:
                return False
            # The subject stays busy: later entries of it wait behind the retry, keeping per-subject order.
            delivery.retry_at = time.monotonic() + delay
            self._retry_seq += 1
            heapq.heappush(self._retry_heap, (delivery.retry_at, self._retry_seq, delivery))
        self._keeper_wake.set()
        return True

    def _block(self, delivery: Delivery) -> None:
        """Pause an entry until the breakers let entries start again; its unused deliveries go back."""
        self._return_credits([delivery])
        with self._lock:
            self._blocked.append(delivery)
        self._keeper_wake.set()

    def _unblock(self) -> None:
        """Resume the paused entries once every breaker is closed again."""
        if not self.breakers.all_closed():
            return
        with self._lock:
            resumed = list(self._blocked)
            self._blocked.clear()
        for delivery in resumed:
            self._dispatch(delivery)

    def _finish_give_up(self, delivery: Delivery, admission: Admission | None) -> None:
        """The final hook, then the dead letter (or, for a consumer whose hook is the destination, the ACK)."""
        reason = delivery.verdict
        assert reason is not None  # only called once a verdict was set
        if not delivery.hook_done:
            with dependencies.observing() as uses:
                try:
                    self.consumer.on_dead_letter(delivery.event, reason)
                except Exception as exc:
                    failed = dependencies.dependency_of(exc)
                    outage = self.breakers.settle(
                        admission or Admission(), entry=delivery.message_id, ok=uses.ok, failed_dependency=failed
                    )
                    outage = self._confirm_outage(failed, outage)
                    delivery.hook_failures += 1
                    log.warning(
                        "%s: final hook failed for %s (%s); the entry stays pending: %s",
                        self.name,
                        delivery.message_id,
                        "dependency down" if outage else f"attempt {delivery.hook_failures}",
                        _text(exc),
                    )
                    if outage:
                        self._block(delivery)
                    else:
                        self._later(delivery, min(2.0**delivery.hook_failures, 60.0))
                    return
            if admission is not None:
                self.breakers.settle(admission, entry=delivery.message_id, ok=uses.ok, failed_dependency=None)
            delivery.hook_done = True
        elif admission is not None:
            self.breakers.release(admission)
        if not self.consumer.dead_letter_stream:
            self._m["dead_lettered"].inc()
            self._acks.put(delivery.message_id)
            self._release(delivery)
            return
        try:
            result = dead_letter(
                self.client,
                stream=self.stream,
                group=self.group,
                consumer=self.name,
                message_id=delivery.message_id,
                fields=delivery.fields,
                raw=delivery.raw if delivery.fields is None else None,
                delivery_count=delivery.delivery_count,
                error_class=reason.error_class,
                error=reason.error,
                scripts=self.scripts,
            )
        except redis.RedisError as exc:
            self._redis_down(exc, f"dead-lettering {delivery.message_id}")
            self._later(delivery, 1.0)  # still ours: try again
            return
        if result is None:
            self._m["lease_lost"].inc()
            self._m_lease_lost.inc()
        else:
            self._m["dead_lettered"].inc()
            if result:
                metrics.DEAD_LETTERS.labels(self.stream, self.group, reason.error_class).inc()
                log.warning(
                    "%s: dead-lettered %s (%s): %s", self.name, delivery.message_id, reason.error_class, reason.error
                )
        self._release(delivery)

    def _lost(self, delivery: Delivery) -> None:
        log.warning(
            "%s: lease lost on %s (subject %s); not ACKed, nothing committed",
            self.name,
            delivery.message_id,
            delivery.subject,
        )
        self._m["lease_lost"].inc()
        self._m_lease_lost.inc()
        self._release(delivery)

    def _owns(self, message_id: str) -> bool:
        try:
            pending: list[dict[str, Any]] = self.client.xpending_range(
                self.stream, self.group, message_id, message_id, 1
            )
        except redis.RedisError:
            return False  # cannot prove ownership: do not commit
        return bool(pending) and text(pending[0]["consumer"]) == self.name

    # --- ACK batching -----------------------------------------------------------------------------------------

    def _ack_loop(self) -> None:
        batch: list[str] = []
        done = False
        failures = 0
        while True:
            self.loops.tick("acker")
            if not batch:
                if done:
                    return
                try:
                    first = self._acks.get(timeout=1.0)
                except queue.Empty:
                    continue
                done = first is _STOP
                batch = [] if done else [first]
                while len(batch) < 1000:
                    try:
                        item = self._acks.get_nowait()
                    except queue.Empty:
                        break
                    if item is _STOP:
                        done = True
                        continue
                    batch.append(item)
                if not batch:
                    continue
            self._acking = len(batch)
            try:
                acked = self._ack_batch(batch)
            finally:
                self._acking = 0
            if acked:
                batch, failures = [], 0
                continue
            failures += 1
            if done and failures >= 5:
                # Stopping and Redis still away: they stay pending; a redelivery finds them consumed and ACKs.
                log.warning("%s: giving up ACK of %d entries at stop", self.name, len(batch))
                batch = []
                continue
            time.sleep(min(0.5 * failures, 5.0))  # Redis down: keep the batch, never drop it while running

    def _ack_batch(self, ids: list[str]) -> bool:
        try:
            lost = self.scripts.ack(keys=[self.stream], args=[self.group, self.name, *ids])
        except redis.RedisError as exc:
            self._redis_down(exc, f"ACK of {len(ids)} entries")
            return False
        self._redis_up()
        if lost:
            lost = [text(mid) for mid in lost]
            log.warning("%s: %d entries finished after their lease was lost: %s", self.name, len(lost), lost[:10])
            self._m_lease_lost.inc(len(lost))
        return True

    # --- leases, retries, reclaim -------------------------------------------------------------------------------

    def _keep_loop(self) -> None:
        beat_every = max(self.lease_seconds / 3, 0.05)
        reclaim_every = max(self.lease_seconds / 2, 0.2)
        next_beat = time.monotonic() + beat_every
        next_reclaim = time.monotonic()  # at start: take over entries of crashed consumers
        while not (self._stopping.is_set() and self._running == 0 and self._work_drained()):
            self.loops.tick("keeper")
            now = time.monotonic()
            try:
                if now >= next_beat:
                    self._heartbeat()
                    next_beat = now + beat_every
                if not self._stopping.is_set():
                    self._unblock()
                    self._redeliver_due(now)
                    if now >= next_reclaim:
                        self._reclaim()
                        next_reclaim = now + reclaim_every
            except redis.RedisError as exc:
                # Keep beating whatever went wrong: a dead keeper would let every lease lapse.
                self._redis_down(exc, "lease keeping")
                self._stopping.wait(0.5)
            self._export_breakers()
            if self._stopping.is_set():
                # Only heartbeats for handlers still running during the grace period.
                wait = next_beat - time.monotonic()
            else:
                with self._lock:
                    next_retry = self._retry_heap[0][0] if self._retry_heap else float("inf")
                    paused = bool(self._blocked)
                wake = min(next_beat, next_retry, next_reclaim)
                if paused:
                    wake = min(wake, time.monotonic() + max(self.breakers.retry_in(), 0.05))
                wait = wake - time.monotonic()
            self._keeper_wake.wait(max(0.0, min(wait, 1.0)))
            self._keeper_wake.clear()

    def _work_drained(self) -> bool:
        return all(not self.loops.thread(name).is_alive() for name in self._worker_names)

    def _heartbeat(self) -> None:
        with self._lock:
            held = list(self._held.values())
        if not held:
            return
        by_id = {d.message_id: d for d in held}
        ids = list(by_id)
        for i in range(0, len(ids), 500):
            lost = self.scripts.heartbeat(keys=[self.stream], args=[self.group, self.name, *ids[i : i + 500]])
            for message_id in map(text, lost):
                delivery = by_id[message_id]
                delivery.lease.lose()
                log.warning("%s: lost ownership of %s (subject %s)", self.name, message_id, delivery.subject)
                if delivery.retry_at is not None:
                    self._drop_retry(delivery)
                    self._lost(delivery)
        self._redis_up()

    def _drop_retry(self, delivery: Delivery) -> None:
        with self._lock:
            self._retry_heap = [entry for entry in self._retry_heap if entry[2] is not delivery]
            heapq.heapify(self._retry_heap)
            delivery.retry_at = None

    def _redeliver_due(self, now: float) -> None:
        if not self.breakers.all_closed():
            return  # retries wait for the outage to end (paused entries go first, as probes)
        while True:
            with self._lock:
                if not self._retry_heap or self._retry_heap[0][0] > now:
                    return
                _, _, delivery = heapq.heappop(self._retry_heap)
                delivery.retry_at = None
            if delivery.verdict is not None:
                self._dispatch(delivery)  # the final hook or the dead letter is tried again
                continue
            try:
                result = self.scripts.redeliver(keys=[self.stream], args=[self.group, self.name, delivery.message_id])
            except redis.RedisError:
                with self._lock:  # try again shortly; the entry stays ours meanwhile
                    delivery.retry_at = now + 1.0
                    self._retry_seq += 1
                    heapq.heappush(self._retry_heap, (delivery.retry_at, self._retry_seq, delivery))
                raise
            if not result:
                delivery.lease.lose()
                self._lost(delivery)
                continue
            count, fields = int(result[0]), result[1]
            delivery.delivery_count = count
            delivery.credit = 1  # REDELIVER counted the attempt about to start
            if not fields:
                self._acks.put(delivery.message_id)
                self._release(delivery)
                continue
            self._dispatch(delivery)

    def _reclaim(self) -> None:
        if not self.breakers.all_closed():
            return  # during an outage, entries of crashed consumers wait where they are
        with self._lock:
            room = min(self.concurrency - self._dispatched, self.capacity - (len(self._held) - len(self._retry_heap)))
        if room <= 0:
            return
        min_idle = int(self.lease_seconds * 1000)
        try:
            response = self.client.xautoclaim(
                self.stream, self.group, self.name, min_idle, self._reclaim_cursor, count=room
            )
        except redis.ResponseError as exc:
            if "NOGROUP" in str(exc):
                return
            raise
        self._reclaim_cursor = text(response[0] or b"0-0")
        # Redis 6.2 returns entries deleted from the stream as (None, None), without their id: they cannot be
        # ACKed from here (Redis 7 drops them from the pending list itself). MINID trimming never deletes
        # unfinished entries, so only a MAXLEN-trimmed, far-behind group can meet them.
        claimed = [(text(mid), raw) for mid, raw in response[1] if mid is not None]
        with self._lock:
            for message_id, _ in claimed:
                mine = self._held.get(message_id)
                if mine is not None:
                    # Our own entry went idle (Redis was unreachable for the heartbeats): XAUTOCLAIM counted a
                    # delivery nobody used.
                    mine.delivery_count += 1
                    mine.credit += 1
        entries = [(mid, raw) for mid, raw in claimed if mid not in self._held]
        if not entries:
            return
        ids = sorted((mid for mid, _ in entries), key=id_key)
        pending: list[dict[str, Any]] = self.client.xpending_range(
            self.stream, self.group, ids[0], ids[-1], len(ids) + 100, self.name
        )
        counts = {text(p["message_id"]): p["times_delivered"] for p in pending}
        self._m_reclaimed.inc(len(entries))
        self.activity += 1
        log.info("%s: reclaimed %d idle entries", self.name, len(entries))
        parked: list[Delivery] = []
        for message_id, raw in entries:
            self._accept_safely(message_id, raw or None, counts.get(message_id, 2), parked)
        self._return_credits(parked)

    # --- health --------------------------------------------------------------------------------------------

    def _redis_down(self, exc: BaseException, what: str) -> None:
        log.warning("%s: Redis unavailable (%s): %s", self.name, what, _text(exc))
        self.breakers.by_name[dependencies.REDIS].trip()

    def _redis_up(self) -> None:
        breaker = self.breakers.by_name[dependencies.REDIS]
        if breaker.state is not State.CLOSED:
            breaker.success()

    def _loop_error(self, loop: str) -> None:
        metrics.LOOP_ERRORS.labels(self.stream, self.group, "worker" if loop.startswith("worker") else loop).inc()

    def _export_breakers(self) -> None:
        for name, breaker in self.breakers.by_name.items():
            metrics.BREAKER_STATE.labels(self.stream, self.group, name).set(_BREAKER_LEVEL[str(breaker.state)])
            opened = breaker.opened - self._opened_seen.get(name, 0)
            if opened:
                metrics.BREAKER_OPENED.labels(self.stream, self.group, name).inc(opened)
                self._opened_seen[name] = breaker.opened


def _text(error: BaseException | None) -> str:
    if error is None:
        return ""
    return f"{type(error).__name__}: {error}"
