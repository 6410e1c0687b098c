"""The lease keeper of one runner (docs/delivery.md#leases-and-reclaim): one thread that keeps this consumer's
claim on what it holds and takes over what dead consumers left.

Each turn it:
- renews the lease of every held entry (the HEARTBEAT script: XCLAIM … JUSTID resets the idle time without
  counting a delivery, only while this consumer still owns the entry); an entry it no longer owns has its
  `Lease` marked lost, so its handler stops before committing;
- resumes entries paused by an open circuit breaker once every breaker is closed again; while one is half-open
  with the probe's verdict, starts one entry for real as its trial (the oldest paused, else a due retry);
- redelivers retries whose delay has passed (the REDELIVER script: an owner-checked XCLAIM that counts the
  attempt about to start);
- every half lease (sooner while a scan is unfinished: no worker was free, or more entries are left to look
  at), takes over entries idle longer than the lease (XAUTOCLAIM): their consumer died. An entry
  of its own that went idle (Redis was away for the heartbeats) is not taken twice: it is charged a credit
  for the delivery XAUTOCLAIM counted (pipeline.runtime.deliveries).
While Redis is away it keeps turning (a keeper that stopped would let every lease lapse); during an outage
(a breaker not closed) it neither redelivers nor reclaims.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import redis

from pipeline.runtime import instruments
from pipeline.runtime.deliveries import Delivery
from pipeline.runtime.entries import RawFields
from pipeline.runtime.naming import id_key, text
from pipeline.runtime.wiring import Shared

log = logging.getLogger(__name__)

HEARTBEAT_BATCH = 500
RECLAIM_AGAIN_SECONDS = 0.2  # after a reclaim that could not finish its scan (no free worker, more to scan)

# Takes an entry this consumer now owns: (message id, raw fields or None if deleted, delivery count) for the
# handlers, those that have to wait appended to the list (their credits go back), and when the command that
# delivered it was sent (time.monotonic(): its proof of ownership, Lease.confirm).
Take = Callable[[str, RawFields | None, int, list[Delivery], float], None]


class Keeper:
    def __init__(self, shared: Shared, *, lease_seconds: float, take: Take, lost: Callable[[Delivery], None]):
        self.member, self.scheduler, self.acker = shared.member, shared.scheduler, shared.acker
        self.lease_seconds = lease_seconds
        self._take = take
        self._give_back = shared.counts.give_back
        self._lost = lost
        self._stopping = shared.stopping
        self._wake = shared.wake_keeper
        self.reclaims = 0  # reclaims that took entries: a progress counter
        self.scanned = False  # one XAUTOCLAIM scan went through every pending entry since start
        self._unfinished = False  # the last reclaim left part of the scan for later
        self._cursor = "0-0"
        self._reclaimed = instruments.RECLAIMED.labels(self.member.stream, self.member.group)

    def loop(
        self,
        *,
        tick: Callable[[], None],
        reclaim: Callable[[], None],
        after_turn: Callable[[], None],
        workers_done: Callable[[], bool],
    ) -> None:
        """Turn until stopping with every worker done. `reclaim` is the reclaim step (normally self.reclaim),
        `after_turn` runs after every turn (breaker metrics)."""
        beat_every = max(self.lease_seconds / 3, 0.05)
        reclaim_every = max(self.lease_seconds / 2, 0.2)
        next_beat = time.monotonic() + beat_every
        next_reclaim = time.monotonic()  # at start: take over entries of crashed consumers
        while not (self._stopping.is_set() and self.scheduler.running == 0 and workers_done()):
            tick()
            now = time.monotonic()
            try:
                if now >= next_beat:
                    self.heartbeat()
                    next_beat = now + beat_every
                if not self._stopping.is_set():
                    self.resume_paused()
                    self.redeliver_due(now)
                    if now >= next_reclaim:
                        reclaim()
                        next_reclaim = now + (RECLAIM_AGAIN_SECONDS if self._unfinished else reclaim_every)
            except redis.RedisError as exc:
                # Keep beating whatever went wrong: a dead keeper would let every lease lapse.
                self.member.redis_down(exc, "lease keeping")
                self._stopping.wait(0.5)
            after_turn()
            self._wake.wait(max(0.0, min(self._until_next(next_beat, next_reclaim), 1.0)))
            self._wake.clear()

    def _until_next(self, next_beat: float, next_reclaim: float) -> float:
        if self._stopping.is_set():
            # Only heartbeats for handlers still running during the grace period.
            return next_beat - time.monotonic()
        now, breakers, scheduler = time.monotonic(), self.member.breakers, self.scheduler
        wake = min(next_beat, next_reclaim)
        if breakers.all_closed():
            wake = min(wake, scheduler.next_retry_at())
        elif scheduler.has_paused() or scheduler.next_retry_at() <= now:
            # Waiting for a breaker: look again when it may let a trial through (the reader's probe and the
            # end of a trial wake the keeper sooner).
            wake = min(wake, now + max(breakers.retry_in(), 0.05 if breakers.ready() else 0.5))
        return wake - now

    def heartbeat(self) -> None:
        """Renew the lease of every held entry; mark lost those this consumer no longer owns."""
        with self.scheduler.lock:
            by_id = {d.message_id: d for d in self.scheduler.held.values()}
        if not by_id:
            return
        member = self.member
        ids = list(by_id)
        for i in range(0, len(ids), HEARTBEAT_BATCH):
            batch = ids[i : i + HEARTBEAT_BATCH]
            sent_at = time.monotonic()
            lost = set(
                map(text, member.scripts.heartbeat(keys=[member.stream], args=[member.group, member.name, *batch]))
            )
            for message_id in batch:
                if message_id not in lost:
                    by_id[message_id].lease.confirm(sent_at)
            for message_id in lost:
                delivery = by_id[message_id]
                delivery.lease.lose()
                log.warning("%s: lost ownership of %s (subject %s)", member.name, message_id, delivery.subject)
                if delivery.retry_at is not None:
                    self.scheduler.drop_retry(delivery)
                    self._lost(delivery)
        member.redis_up()

    def resume_paused(self) -> None:
        """Resume the paused entries once every breaker is closed again. While a half-open breaker lets one
        trial through, start one: the oldest paused entry, else a retry that is due."""
        breakers = self.member.breakers
        if breakers.all_closed():
            self.scheduler.resume_paused()
        elif breakers.ready() and not self.scheduler.resume_one() and self.scheduler.quiet():
            self.redeliver_due(time.monotonic(), limit=1)

    def redeliver_due(self, now: float, *, limit: int | None = None) -> None:
        """Start the retries whose delay has passed (owner-checked XCLAIM, counting the attempt); with `limit`
        (a trial), that many even while a breaker is not closed."""
        if limit is None and not self.member.breakers.all_closed():
            return  # retries wait for the outage to end (paused entries go first, as trials)
        member = self.member
        started = 0
        while (limit is None or started < limit) and (delivery := self.scheduler.take_due(now)) is not None:
            started += 1
            if delivery.verdict is not None:
                self.scheduler.dispatch(delivery)  # the final hook or the dead letter is tried again
                continue
            sent_at = time.monotonic()
            try:
                result = member.scripts.redeliver(
                    keys=[member.stream], args=[member.group, member.name, delivery.message_id]
                )
            except redis.RedisError:
                self.scheduler.retry_soon(delivery, now + 1.0)  # the entry stays ours meanwhile
                raise
            if not result:
                delivery.lease.lose()
                self._lost(delivery)
                continue
            delivery.lease.confirm(sent_at)
            delivery.delivery_count = int(result[0])
            delivery.credit = 1  # REDELIVER counted the attempt about to start
            if not result[1]:  # deleted from the stream meanwhile: nothing to handle
                self.acker.put(delivery.message_id)
                self.scheduler.release(delivery)
                continue
            self.scheduler.dispatch(delivery)

    def reclaim(self) -> None:
        """Take over entries idle longer than the lease (their consumer died), as many as workers are free."""
        self._unfinished = True
        if not self.member.breakers.all_closed():
            return  # during an outage, entries of crashed consumers wait where they are
        with self.scheduler.lock:
            room = self.scheduler.free_workers()
        if room <= 0:
            return
        member = self.member
        sent_at = time.monotonic()
        try:
            response = member.client.xautoclaim(
                member.stream, member.group, member.name, int(self.lease_seconds * 1000), self._cursor, count=room
            )
        except redis.ResponseError as exc:
            if "NOGROUP" in str(exc):
                return
            raise
        self._cursor = text(response[0] or b"0-0")
        self._unfinished = self._cursor != "0-0"
        self.scanned = self.scanned or not self._unfinished
        # Redis 6.2 returns entries deleted from the stream as (None, None), without their id: they cannot be
        # ACKed from here (Redis 7 drops them from the pending list itself). MINID trimming never deletes
        # unfinished entries, so only a MAXLEN-trimmed, far-behind group can meet them.
        claimed = [(text(mid), raw) for mid, raw in response[1] if mid is not None]
        entries = self._not_held(claimed)
        if entries:
            self._take_over(entries, sent_at)

    def _not_held(self, claimed: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
        with self.scheduler.lock:
            held = self.scheduler.held
            for message_id, _ in claimed:
                mine = held.get(message_id)
                if mine is not None:
                    # Our own entry went idle (Redis was unreachable for the heartbeats): XAUTOCLAIM counted a
                    # delivery nobody used.
                    mine.delivery_count += 1
                    mine.credit += 1
            return [(mid, raw) for mid, raw in claimed if mid not in held]

    def _take_over(self, entries: list[tuple[str, Any]], sent_at: float) -> None:
        member = self.member
        ids = sorted((mid for mid, _ in entries), key=id_key)
        pending: list[dict[str, Any]] = member.client.xpending_range(
            member.stream, member.group, ids[0], ids[-1], len(ids) + 100, member.name
        )
        counts = {text(p["message_id"]): p["times_delivered"] for p in pending}
        self._reclaimed.inc(len(entries))
        self.reclaims += 1
        log.info("%s: reclaimed %d idle entries", member.name, len(entries))
        parked: list[Delivery] = []
        for message_id, raw in entries:
            self._take(message_id, raw or None, counts.get(message_id, 2), parked, sent_at)
        self._give_back(parked)
