"""The stream runtime for one consumer (SPEC §5.3): read, dispatch per subject to a worker pool, keep leases,
retry, reclaim, ACK in batches and dead-letter — at-least-once delivery for handlers with exactly-once effects.

Threads per consumer: a reader (blocking XREADGROUP), `concurrency` workers, an acker (one ownership-checked
ACK script call per batch of finished entries) and a keeper (heartbeats, due retries, XAUTOCLAIM).
"""

from __future__ import annotations

import heapq
import logging
import os
import queue
import socket
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass

import redis
from django.conf import settings
from django.db import close_old_connections, connection

from eigenflux.redis import get_redis
from pipeline import metrics
from pipeline.runtime.consumer import Consumer
from pipeline.runtime.deadletter import dead_letter
from pipeline.runtime.errors import DeadLetterNow, LeaseLost, NothingToDo, RetryLater
from pipeline.runtime.event import Event, Lease, MalformedEntry
from pipeline.runtime.logcontext import delivery_log_context
from pipeline.runtime.scripts import Scripts

log = logging.getLogger(__name__)

_STOP = object()


def consumer_name(name: str) -> str:
    """Unique per process lifetime, so a restarted process never inherits a dead one's entries by accident."""
    return f"{name}-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


@dataclass(eq=False)
class Delivery:
    """One pending entry held by this process."""

    message_id: str
    fields: dict[str, str]
    delivery_count: int
    event: Event
    retry_at: float | None = None  # set while it waits for a retry (its subject stays busy meanwhile)

    @property
    def subject(self) -> str:
        return self.event.subject


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
        self.client = client or get_redis()
        self.scripts = Scripts(self.client)

        self._lock = threading.Lock()
        self._room = threading.Condition(self._lock)  # signalled when held entries finish
        self._held: dict[str, Delivery] = {}  # every entry this process owns: queued, running or waiting to retry
        self._busy_subjects: set[str] = set()
        self._subject_queues: dict[str, deque[Delivery]] = {}
        self._retry_heap: list[tuple[float, int, Delivery]] = []
        self._retry_seq = 0
        self._work: queue.SimpleQueue = queue.SimpleQueue()
        self._acks: queue.SimpleQueue = queue.SimpleQueue()
        self._keeper_wake = threading.Event()
        self._stopping = threading.Event()  # stop reading and starting handlers
        self._threads: list[threading.Thread] = []
        self._workers: list[threading.Thread] = []
        self._running = 0
        self._acking = 0
        self._reclaim_cursor = "0-0"
        # For --burst: progress counters the supervisor compares between two looks.
        self.activity = 0
        self.empty_reads = 0

        labels = (self.stream, self.group)
        self._m = {
            outcome: metrics.MESSAGES.labels(*labels, outcome)
            for outcome in ("acked", "nothing_to_do", "retried", "dead_lettered", "lease_lost", "released")
        }
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
        for target, label in ((self._read_loop, "reader"), (self._ack_loop, "acker"), (self._keep_loop, "keeper")):
            self._threads.append(threading.Thread(target=target, name=f"{self.consumer.name}-{label}", daemon=True))
        for i in range(self.concurrency):
            self._workers.append(
                threading.Thread(target=self._work_loop, name=f"{self.consumer.name}-worker-{i}", daemon=True)
            )
        for thread in self._threads + self._workers:
            thread.start()

    def request_stop(self) -> None:
        """Stop reading and starting handlers; running handlers finish (see stop())."""
        self._stopping.set()
        self._keeper_wake.set()
        with self._room:
            self._room.notify_all()

    def stop(self, grace: float) -> None:
        """Graceful stop: wait up to `grace` s for running handlers, then cancel them; entries not finished
        stay pending in the group for another process to reclaim (nothing is lost)."""
        self.request_stop()
        for _ in self._workers:
            self._work.put(_STOP)
        deadline = time.monotonic() + grace
        for worker in self._workers:
            worker.join(max(0.0, deadline - time.monotonic()))
        if any(w.is_alive() for w in self._workers):
            log.warning("%s: handlers still running after %.1fs grace; cancelling them", self.name, grace)
            with self._lock:
                for delivery in self._held.values():
                    delivery.event.lease.cancelled.set()
            for worker in self._workers:
                worker.join(2.0)
        self._acks.put(_STOP)
        self._keeper_wake.set()  # workers are done: let the keeper see it now
        for thread in self._threads:
            thread.join(max(2.0, self.block_ms / 1000 + 1))
        with self._lock:
            left = len(self._held)
        if left:
            log.info("%s: %d entries left pending for reclaim", self.name, left)

    def idle(self) -> bool:
        """Nothing held except retries due later than the burst horizon, nothing left to ACK."""
        horizon = time.monotonic() + self.burst_retry_horizon
        with self._lock:
            for delivery in self._held.values():
                if delivery.retry_at is None or delivery.retry_at <= horizon:
                    return False
        return self._acks.empty() and self._running == 0 and self._acking == 0

    # --- reading and dispatch -----------------------------------------------------------------------------

    def _read_loop(self) -> None:
        while not self._stopping.is_set():
            with self._room:
                while len(self._held) - self._waiting_retries() >= self.capacity and not self._stopping.is_set():
                    self._room.wait(0.5)
                room = self.capacity - (len(self._held) - self._waiting_retries())
            if self._stopping.is_set():
                break
            try:
                response = self.client.xreadgroup(
                    self.group, self.name, {self.stream: ">"}, count=min(room, self.batch_size), block=self.block_ms
                )
            except redis.ResponseError as exc:
                if "NOGROUP" in str(exc):
                    self._recreate_group()
                    continue
                log.exception("%s: XREADGROUP failed", self.name)
                self._stopping.wait(1.0)
                continue
            except redis.RedisError:
                log.exception("%s: Redis unavailable; retrying", self.name)
                self._stopping.wait(1.0)
                continue
            entries = response[0][1] if response else []
            if not entries:
                self.empty_reads += 1
                continue
            self.activity += 1
            for message_id, fields in entries:
                self._accept_safely(message_id, fields, 1)

    def _recreate_group(self) -> None:
        try:
            self.ensure_group()
        except redis.RedisError:
            log.exception("%s: cannot create group", self.name)
            self._stopping.wait(1.0)

    def _waiting_retries(self) -> int:
        return len(self._retry_heap)

    def _accept_safely(self, message_id: str, fields: dict[str, str] | None, delivery_count: int) -> None:
        """Hostile input must never stop the loop: anything unexpected dead-letters the entry."""
        try:
            self._accept(message_id, fields, delivery_count)
        except Exception as exc:
            log.exception("%s: cannot dispatch %s", self.name, message_id)
            self._dead_letter(message_id, fields, delivery_count, "permanent", f"undispatchable: {_text(exc)}")

    def _accept(self, message_id: str, fields: dict[str, str] | None, delivery_count: int) -> None:
        """Take an entry this process now owns: dead-letter it if malformed or over its deliveries, else queue it."""
        if fields is None:
            # Deleted from the stream while pending (trimmed): there is nothing to handle.
            self._acks.put(message_id)
            return
        if delivery_count > self.policy.max_retries:
            self._dead_letter(message_id, fields, delivery_count, "transient", f"delivered {delivery_count} times")
            return
        lease = Lease(verify=lambda: self._owns(message_id))
        try:
            event = self.consumer.parse(
                stream=self.stream,
                group=self.group,
                message_id=message_id,
                fields=fields,
                delivery_count=delivery_count,
                lease=lease,
            )
        except MalformedEntry as exc:
            log.warning("%s: malformed entry %s: %s", self.name, message_id, exc)
            self._dead_letter(message_id, fields, delivery_count, "permanent", f"malformed: {exc}")
            return
        target = fields.get("targetgroup")
        if target and target != self.group:
            # A replay meant for another group of this stream (e.g. a requeued dead letter): not ours.
            self._acks.put(message_id)
            return
        delivery = Delivery(message_id=message_id, fields=fields, delivery_count=delivery_count, event=event)
        with self._lock:
            self._held[message_id] = delivery
            if event.subject in self._busy_subjects:
                self._subject_queues.setdefault(event.subject, deque()).append(delivery)
                return
            self._busy_subjects.add(event.subject)
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
            self._work.put(nxt)

    # --- handling ------------------------------------------------------------------------------------------

    def _work_loop(self) -> None:
        try:
            while True:
                delivery = self._work.get()
                if delivery is _STOP:
                    return
                if self._stopping.is_set():
                    # Not started: leave it pending (another process reclaims it after the lease timeout).
                    self._m["released"].inc()
                    self._forget(delivery)
                    continue
                if delivery.event.lease.cancelled.is_set():
                    self._lost(delivery)
                    continue
                with self._lock:
                    self._running += 1
                try:
                    # Every line logged while handling (the handler's and the runtime's) carries the delivery's ids.
                    with delivery_log_context(
                        delivery.event, consumer=self.name, delivery_count=delivery.delivery_count
                    ):
                        self._handle(delivery)
                finally:
                    with self._lock:
                        self._running -= 1
        finally:
            connection.close()

    def _forget(self, delivery: Delivery) -> None:
        with self._room:
            self._held.pop(delivery.message_id, None)
            self._subject_queues.pop(delivery.subject, None)
            self._busy_subjects.discard(delivery.subject)
            self._room.notify_all()

    def _handle(self, delivery: Delivery) -> None:
        event = delivery.event
        event.delivery_count = delivery.delivery_count
        close_old_connections()
        started = time.perf_counter()
        outcome, error = "acked", None
        try:
            self.consumer.handle(event)
        except NothingToDo:
            outcome = "nothing_to_do"
        except LeaseLost:
            # Lost ownership, or cancelled by a hard shutdown (then the entry is merely left pending).
            outcome = "lease_lost" if event.lease.lost else "released"
        except DeadLetterNow as exc:
            outcome, error = "permanent", exc
        except RetryLater as exc:
            outcome, error = "transient", exc
        except Exception as exc:
            # An unexpected error is treated as transient: retried, then dead-lettered for a person to look at.
            log.exception("%s: handler failed on %s (subject %s)", self.name, delivery.message_id, event.subject)
            outcome, error = "transient", exc
        finally:
            # (Obsolete or broken connections are closed before the next handler, as Django does per request.)
            self._m_seconds.observe(time.perf_counter() - started)
        if event.lease.lost:
            outcome = "lease_lost"
        if outcome in ("acked", "nothing_to_do"):
            self._m[outcome].inc()
            self._acks.put(delivery.message_id)
            self._release(delivery)
        elif outcome == "lease_lost":
            self._lost(delivery)
        elif outcome == "released":
            self._m["released"].inc()
            self._release(delivery)
        elif outcome == "permanent":
            self._dead_letter(delivery.message_id, delivery.fields, delivery.delivery_count, "permanent", _text(error))
            self._release(delivery)
        else:
            self._retry_or_dead_letter(delivery, error)

    def _retry_or_dead_letter(self, delivery: Delivery, error: BaseException) -> None:
        delay = self.policy.next_delay(delivery.delivery_count, error)
        if delay is None or self._stopping.is_set():
            if delay is None:
                self._dead_letter(
                    delivery.message_id, delivery.fields, delivery.delivery_count, "transient", _text(error)
                )
            else:
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
        with self._lock:
            # The subject stays busy: later entries of it wait behind the retry, keeping per-subject order.
            delivery.retry_at = time.monotonic() + delay
            self._retry_seq += 1
            heapq.heappush(self._retry_heap, (delivery.retry_at, self._retry_seq, delivery))
        self._keeper_wake.set()

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

    def _dead_letter(self, message_id: str, fields, delivery_count: int, error_class: str, error: str) -> None:
        try:
            result = dead_letter(
                self.client,
                stream=self.stream,
                group=self.group,
                consumer=self.name,
                message_id=message_id,
                fields=fields,
                delivery_count=delivery_count,
                error_class=error_class,
                error=error,
                scripts=self.scripts,
            )
        except redis.RedisError:
            log.exception("%s: dead-lettering %s failed; it stays pending", self.name, message_id)
            return
        if result is None:
            self._m["lease_lost"].inc()
            self._m_lease_lost.inc()
            return
        self._m["dead_lettered"].inc()
        if result:
            metrics.DEAD_LETTERS.labels(self.stream, self.group, error_class).inc()
            log.warning("%s: dead-lettered %s (%s): %s", self.name, message_id, error_class, error)

    def _owns(self, message_id: str) -> bool:
        try:
            pending = self.client.xpending_range(self.stream, self.group, message_id, message_id, 1)
        except redis.RedisError:
            return False  # cannot prove ownership: do not commit
        return bool(pending) and pending[0]["consumer"] == self.name

    # --- ACK batching -----------------------------------------------------------------------------------------

    def _ack_loop(self) -> None:
        done = False
        while not done:
            first = self._acks.get()
            batch = [] if first is _STOP else [first]
            done = first is _STOP
            while len(batch) < 1000:
                try:
                    item = self._acks.get_nowait()
                except queue.Empty:
                    break
                if item is _STOP:
                    done = True
                    continue
                batch.append(item)
            if batch:
                self._flush_acks(batch)

    def _flush_acks(self, ids: list[str]) -> None:
        self._acking = len(ids)
        try:
            self._ack_batch(ids)
        finally:
            self._acking = 0

    def _ack_batch(self, ids: list[str]) -> None:
        for attempt in range(3):
            try:
                lost = self.scripts.ack(keys=[self.stream], args=[self.group, self.name, *ids])
                break
            except Exception:
                log.exception("%s: ACK of %d entries failed (attempt %d)", self.name, len(ids), attempt + 1)
                time.sleep(0.5 * (attempt + 1))
        else:
            return  # they stay pending; a redelivery finds them consumed (consume_once) and ACKs
        if lost:
            log.warning("%s: %d entries finished after their lease was lost: %s", self.name, len(lost), lost[:10])
            self._m_lease_lost.inc(len(lost))

    # --- leases, retries, reclaim -------------------------------------------------------------------------------

    def _keep_loop(self) -> None:
        beat_every = max(self.lease_seconds / 3, 0.05)
        reclaim_every = max(self.lease_seconds / 2, 0.2)
        next_beat = time.monotonic() + beat_every
        next_reclaim = time.monotonic()  # at start: take over entries of crashed consumers
        while not (self._stopping.is_set() and self._running == 0 and self._work_drained()):
            now = time.monotonic()
            try:
                if now >= next_beat:
                    self._heartbeat()
                    next_beat = now + beat_every
                if not self._stopping.is_set():
                    self._redeliver_due(now)
                    if now >= next_reclaim:
                        self._reclaim()
                        next_reclaim = now + reclaim_every
            except Exception:
                # Keep beating whatever went wrong: a dead keeper would let every lease lapse.
                log.exception("%s: lease keeper failed; retrying", self.name)
                time.sleep(0.5)
            if self._stopping.is_set():
                # Only heartbeats for handlers still running during the grace period.
                wait = next_beat - time.monotonic()
            else:
                with self._lock:
                    next_retry = self._retry_heap[0][0] if self._retry_heap else float("inf")
                wait = min(next_beat, next_retry, next_reclaim) - time.monotonic()
            self._keeper_wake.wait(max(0.0, min(wait, 1.0)))
            self._keeper_wake.clear()

    def _work_drained(self) -> bool:
        return all(not w.is_alive() for w in self._workers)

    def _heartbeat(self) -> None:
        with self._lock:
            held = list(self._held.values())
        if not held:
            return
        by_id = {d.message_id: d for d in held}
        ids = list(by_id)
        for i in range(0, len(ids), 500):
            lost = self.scripts.heartbeat(keys=[self.stream], args=[self.group, self.name, *ids[i : i + 500]])
            for message_id in lost:
                delivery = by_id[message_id]
                delivery.event.lease.lose()
                log.warning("%s: lost ownership of %s (subject %s)", self.name, message_id, delivery.subject)
                if delivery.retry_at is not None:
                    self._drop_retry(delivery)
                    self._lost(delivery)

    def _drop_retry(self, delivery: Delivery) -> None:
        with self._lock:
            self._retry_heap = [entry for entry in self._retry_heap if entry[2] is not delivery]
            heapq.heapify(self._retry_heap)
            delivery.retry_at = None

    def _redeliver_due(self, now: float) -> None:
        while True:
            with self._lock:
                if not self._retry_heap or self._retry_heap[0][0] > now:
                    return
                _, _, delivery = heapq.heappop(self._retry_heap)
                delivery.retry_at = None
            try:
                result = self.scripts.redeliver(keys=[self.stream], args=[self.group, self.name, delivery.message_id])
            except redis.RedisError:
                with self._lock:  # try again shortly; the entry stays ours meanwhile
                    delivery.retry_at = now + 1.0
                    self._retry_seq += 1
                    heapq.heappush(self._retry_heap, (delivery.retry_at, self._retry_seq, delivery))
                raise
            if not result:
                delivery.event.lease.lose()
                self._lost(delivery)
                continue
            count, fields = int(result[0]), result[1]
            delivery.delivery_count = count
            if not fields:
                self._acks.put(delivery.message_id)
                self._release(delivery)
                continue
            self._work.put(delivery)

    def _reclaim(self) -> None:
        with self._lock:
            room = self.capacity - (len(self._held) - len(self._retry_heap))
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
        self._reclaim_cursor = response[0] or "0-0"
        # Redis 6.2 returns entries deleted from the stream as (None, None), without their id: they cannot be
        # ACKed from here (Redis 7 drops them from the pending list itself). MINID trimming never deletes
        # unfinished entries, so only a MAXLEN-trimmed, far-behind group can meet them.
        entries = [(mid, fields) for mid, fields in response[1] if mid is not None and mid not in self._held]
        if not entries:
            return
        ids = sorted((mid for mid, _ in entries), key=_id_key)
        pending = self.client.xpending_range(self.stream, self.group, ids[0], ids[-1], len(ids) + 100, self.name)
        counts = {p["message_id"]: p["times_delivered"] for p in pending}
        self._m_reclaimed.inc(len(entries))
        self.activity += 1
        log.info("%s: reclaimed %d idle entries", self.name, len(entries))
        for message_id, fields in entries:
            self._accept_safely(message_id, fields or None, counts.get(message_id, 2))


def _id_key(message_id: str) -> tuple[int, int]:
    ms, _, seq = message_id.partition("-")
    return int(ms), int(seq or 0)


def _text(error: BaseException | None) -> str:
    if error is None:
        return ""
    return f"{type(error).__name__}: {error}"
