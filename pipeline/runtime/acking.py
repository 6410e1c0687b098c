"""The ACK batcher of one runner (docs/delivery.md#runtime): finished entries are acknowledged in batches, each
batch one call of the owner-checked ACK script.

An entry this consumer no longer owns (its lease lapsed and another consumer took it) is not acknowledged by
it: the new owner decides. While Redis is unreachable the batch is kept and tried again, never dropped; only at
a stop, after several failed tries, is it left pending (a redelivery then finds the work done and ACKs it).
"""

from __future__ import annotations

import logging
import queue
import time
from collections.abc import Callable

import redis

from pipeline.runtime import instruments
from pipeline.runtime.membership import Membership
from pipeline.runtime.naming import text

log = logging.getLogger(__name__)

MAX_BATCH = 1000
_STOP = None


class Acker:
    def __init__(self, member: Membership, *, tick: Callable[[], None] = lambda: None):
        self.member = member
        self._tick = tick  # called on every turn of the loop (the stall watch)
        self._ids: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self.acking = 0  # ids in the batch being sent
        self._lease_lost = instruments.LEASE_LOSSES.labels(member.stream, member.group)

    def put(self, message_id: str) -> None:
        """Queue a finished entry's id for the next batch."""
        self._ids.put(message_id)

    def stop(self) -> None:
        """The loop sends what is queued, then ends."""
        self._ids.put(_STOP)

    def idle(self) -> bool:
        return self._ids.empty() and self.acking == 0

    def loop(self) -> None:
        batch: list[str] = []
        done = False
        failures = 0
        while True:
            self._tick()
            if not batch:
                if done:
                    return
                batch, done = self._next_batch()
                if not batch:
                    continue
            self.acking = len(batch)
            try:
                acked = self.ack_batch(batch)
            finally:
                self.acking = 0
            if acked:
                batch, failures = [], 0
                continue
            failures += 1
            if done and failures >= 5:
                # Stopping and Redis still away: they stay pending; a redelivery finds them consumed and ACKs.
                log.warning("%s: giving up ACK of %d entries at stop", self.member.name, len(batch))
                batch = []
                continue
            time.sleep(min(0.5 * failures, 5.0))  # Redis down: keep the batch, never drop it while running

    def _next_batch(self) -> tuple[list[str], bool]:
        """Wait up to a second for an id, then take whatever else is queued (up to MAX_BATCH). True: stop seen."""
        try:
            first = self._ids.get(timeout=1.0)
        except queue.Empty:
            return [], False
        done = first is _STOP
        batch = [] if first is None else [first]
        while len(batch) < MAX_BATCH:
            try:
                item = self._ids.get_nowait()
            except queue.Empty:
                break
            if item is None:
                done = True
                continue
            batch.append(item)
        return batch, done

    def ack_batch(self, ids: list[str]) -> bool:
        """ACK the ids this consumer still owns, in one script call. False if Redis could not be reached."""
        member = self.member
        try:
            lost = member.scripts.ack(keys=[member.stream], args=[member.group, member.name, *ids])
        except redis.RedisError as exc:
            member.redis_down(exc, f"ACK of {len(ids)} entries")
            return False
        member.redis_up()
        if lost:
            lost = [text(mid) for mid in lost]
            log.warning("%s: %d entries finished after their lease was lost: %s", member.name, len(lost), lost[:10])
            self._lease_lost.inc(len(lost))
        return True
