"""The per-subject scheduler of one runner: which held entry runs next, and when (docs/delivery.md#runtime).

Entries of one subject run one at a time, in the order they were taken; entries of different subjects run in
parallel on the worker threads. An entry whose subject is busy waits in that subject's queue; the subject stays
busy while its entry waits for a retry (the retry heap) or for the breakers to close (the paused queue), so a
later entry of the subject never overtakes an earlier one.

Everything here shares one lock (`lock`, and `room`, a condition on it): the held entries, the busy subjects,
the retry heap and the counters the reader and the keeper size their reads by. One lock keeps each decision
(is the subject busy? is the retry backlog full? how much room is there?) atomic with the change it leads to;
nothing slow (no Redis call) ever runs under it.
"""

from __future__ import annotations

import heapq
import queue
import threading
import time
from collections import deque
from typing import Final

from pipeline.runtime.deliveries import Delivery

STOP: Final = None  # on the work queue: a worker ends


class Scheduler:
    def __init__(self, *, concurrency: int, capacity: int, wake_keeper: threading.Event):
        self.concurrency = concurrency  # worker threads
        self.capacity = capacity  # entries held at once, not counting those waiting for a retry
        self.lock = threading.Lock()
        self.room = threading.Condition(self.lock)  # signalled when held entries finish or workers free up
        self.held: dict[str, Delivery] = {}  # every entry this process owns: queued, running, waiting or paused
        self.busy_subjects: set[str] = set()
        self.subject_queues: dict[str, deque[Delivery]] = {}
        self.retry_heap: list[tuple[float, int, Delivery]] = []
        self.paused: deque[Delivery] = deque()  # paused by an open circuit breaker, credits returned
        self.left: list[Delivery] = []  # not started because of a stop: their credits go back at the end
        self.dispatched = 0  # on the work queue or in a worker
        self.running = 0  # handlers (or final hooks) under way
        self.released = 0  # entries let go so far: a progress counter
        self._retry_seq = 0
        self._work: queue.SimpleQueue[Delivery | None] = queue.SimpleQueue()
        self._wake_keeper = wake_keeper

    # --- taking entries and handing them to workers ---------------------------------------------------------

    def room_for_reading(self, *, batch_size: int, allowed: bool, wait: float = 0.5) -> int:
        """How many entries may be taken now (none unless `allowed`): never more than idle workers, so each
        starts at once. When there is none, waits up to `wait` s for some to free up (and still answers 0)."""
        with self.room:
            room = min(self.free_workers(), batch_size) if allowed else 0
            if room <= 0:
                self.room.wait(wait)
            return max(room, 0)

    def free_workers(self) -> int:
        """Idle workers not already promised an entry, within the capacity. Call with `lock` held."""
        active = len(self.held) - len(self.retry_heap)
        return min(self.concurrency - self.dispatched, self.capacity - active)

    def enqueue(self, delivery: Delivery, parked: list[Delivery]) -> None:
        """Hold the entry; start it unless an entry of its subject is ahead of it (then it waits, in `parked`)."""
        with self.lock:
            self.held[delivery.message_id] = delivery
            if delivery.subject in self.busy_subjects:
                self.subject_queues.setdefault(delivery.subject, deque()).append(delivery)
                parked.append(delivery)
                return
            self.busy_subjects.add(delivery.subject)
        self.dispatch(delivery)

    def dispatch(self, delivery: Delivery) -> None:
        """Hand a held entry whose subject it holds to the workers."""
        with self.lock:
            self.dispatched += 1
        self._work.put(delivery)

    def next_work(self, timeout: float) -> Delivery | None:
        """The next entry for a worker; None: the worker stops. queue.Empty after `timeout` s."""
        return self._work.get(timeout=timeout)

    def work_done(self) -> None:
        """A worker finished with what it took from the work queue."""
        with self.room:
            self.dispatched -= 1
            self.room.notify_all()

    def started(self) -> None:
        with self.lock:
            self.running += 1

    def finished(self) -> None:
        with self.lock:
            self.running -= 1

    def stop_workers(self, count: int) -> None:
        for _ in range(count):
            self._work.put(STOP)

    # --- letting entries go ----------------------------------------------------------------------------------

    def release(self, delivery: Delivery) -> None:
        """Forget an entry and hand its subject to the next queued entry of that subject."""
        with self.room:
            self.held.pop(delivery.message_id, None)
            self.released += 1
            pending = self.subject_queues.get(delivery.subject)
            nxt = None
            while pending:
                nxt = pending.popleft()
                if nxt.message_id in self.held:
                    break
                nxt = None
            if pending is not None and not pending:
                del self.subject_queues[delivery.subject]
            if nxt is None:
                self.busy_subjects.discard(delivery.subject)
            self.room.notify_all()
        if nxt is not None:
            self.dispatch(nxt)

    def leave(self, delivery: Delivery) -> None:
        """Not started because of a stop: forget the entry and its subject's queue (all stay pending)."""
        with self.room:
            self.held.pop(delivery.message_id, None)
            self.subject_queues.pop(delivery.subject, None)
            self.busy_subjects.discard(delivery.subject)
            self.left.append(delivery)
            self.room.notify_all()

    def all_held(self) -> list[Delivery]:
        """Every entry still held, and those left at a stop."""
        with self.lock:
            return [*self.held.values(), *self.left]

    # --- waiting: retries and pauses -------------------------------------------------------------------------

    def later(self, delivery: Delivery, delay: float, cap: int | None = None) -> bool:
        """Hold the entry for `delay` seconds; with `cap`, only while fewer than `cap` are held (checked and taken
        under one lock, so that concurrent handlers cannot overshoot it). False: not held."""
        with self.lock:
            if cap is not None and len(self.retry_heap) >= cap:
                return False
            # The subject stays busy: later entries of it wait behind the retry, keeping per-subject order.
            self._push_retry(delivery, time.monotonic() + delay)
        self._wake_keeper.set()
        return True

    def retry_soon(self, delivery: Delivery, at: float) -> None:
        """Put an entry taken for its retry back on the heap (the redelivery could not be made)."""
        with self.lock:
            self._push_retry(delivery, at)

    def _push_retry(self, delivery: Delivery, at: float) -> None:
        delivery.retry_at = at
        self._retry_seq += 1
        heapq.heappush(self.retry_heap, (at, self._retry_seq, delivery))

    def take_due(self, now: float) -> Delivery | None:
        """The next entry whose retry is due by `now`, taken off the heap; None if there is none yet."""
        with self.lock:
            if not self.retry_heap or self.retry_heap[0][0] > now:
                return None
            _, _, delivery = heapq.heappop(self.retry_heap)
            delivery.retry_at = None
            return delivery

    def drop_retry(self, delivery: Delivery) -> None:
        with self.lock:
            self.retry_heap = [entry for entry in self.retry_heap if entry[2] is not delivery]
            heapq.heapify(self.retry_heap)
            delivery.retry_at = None

    def next_retry_at(self) -> float:
        with self.lock:
            return self.retry_heap[0][0] if self.retry_heap else float("inf")

    def pause(self, delivery: Delivery) -> None:
        """Hold the entry until the breakers close (see resume_paused)."""
        with self.lock:
            self.paused.append(delivery)
        self._wake_keeper.set()

    def resume_paused(self) -> None:
        """Hand every paused entry to the workers again."""
        with self.lock:
            resumed = list(self.paused)
            self.paused.clear()
        for delivery in resumed:
            self.dispatch(delivery)

    def resume_one(self) -> bool:
        """Hand the oldest paused entry to the workers (a half-open breaker's trial), unless any entry is on its
        way to a worker or in one already. False: none was paused."""
        with self.lock:
            if not self.paused:
                return False
            if self.dispatched:
                return True  # one already under way decides first
            delivery = self.paused.popleft()
        self.dispatch(delivery)
        return True

    def quiet(self) -> bool:
        """Nothing paused and nothing on its way to a worker or in one: a new entry may be a trial."""
        with self.lock:
            return not self.paused and not self.dispatched

    def has_paused(self) -> bool:
        with self.lock:
            return bool(self.paused)

    def idle(self, horizon: float) -> bool:
        """Nothing held except retries due later than `horizon`, nothing running."""
        with self.lock:
            for delivery in self.held.values():
                if delivery.retry_at is None or delivery.retry_at <= horizon:
                    return False
            return self.running == 0

    def counts(self) -> dict[str, int]:
        with self.lock:
            held, paused, retrying = len(self.held), len(self.paused), len(self.retry_heap)
        return {"held": held, "running": self.running, "blocked": paused, "retrying": retrying}
