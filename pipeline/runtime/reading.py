"""The reader of one runner (docs/delivery.md#runtime): takes new entries from the group and hands them to the
scheduler.

It reads with a blocking XREADGROUP, never more entries than there are idle workers, so what it takes starts at
once (pipeline.runtime.deliveries explains why that matters for delivery counts). Entries come as raw bytes and
are decoded one by one (pipeline.runtime.entries): one that is not UTF-8, or that the consumer cannot parse, is
given up at once (dead-lettered with its bytes) and the entries around it are handled as usual. While a
circuit breaker is not closed it reads nothing and probes the dependency instead; a group deleted under it is
created again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import redis
from django.db import connection

from pipeline.runtime import dependencies, instruments
from pipeline.runtime.breaker import State
from pipeline.runtime.deliveries import Delivery
from pipeline.runtime.entries import RawFields, UndecodableEntry, decode_fields
from pipeline.runtime.event import Lease, MalformedEntry, NotHandled
from pipeline.runtime.membership import error_text
from pipeline.runtime.naming import text
from pipeline.runtime.wiring import Shared

log = logging.getLogger(__name__)


class Reader:
    def __init__(self, shared: Shared, *, batch_size: int, block_ms: int):
        self.member, self.consumer, self.policy = shared.member, shared.consumer, shared.policy
        self.scheduler, self.acker, self.counts = shared.scheduler, shared.acker, shared.counts
        self.batch_size = batch_size
        self.block_ms = block_ms
        self._trust_seconds = shared.lease_seconds / 2  # how long a read's proof of ownership holds (Lease)
        self._stopping = shared.stopping
        self._wake_keeper = shared.wake_keeper
        self.reads = 0  # reads that returned entries: a progress counter
        self.empty_reads = 0

    def loop(self, tick: Callable[[], None]) -> None:
        try:
            while not self._stopping.is_set():
                tick()
                self.read_once()
        finally:
            connection.close()  # opened only to probe PostgreSQL during an outage

    def read_once(self) -> None:
        room = self._room()
        if room <= 0 or self._stopping.is_set():
            return
        member = self.member
        sent_at = time.monotonic()  # Redis delivers (and resets the entries' idle time) after this
        try:
            response: Any = member.client.xreadgroup(
                member.group, member.name, {member.stream: ">"}, count=room, block=self.block_ms
            )
        except redis.ResponseError as exc:
            if "NOGROUP" in str(exc):
                self._recreate_group()
                return
            log.exception("%s: XREADGROUP failed", member.name)
            self._stopping.wait(1.0)
            return
        except redis.RedisError as exc:
            member.redis_down(exc, "XREADGROUP")
            self._stopping.wait(1.0)
            return
        member.redis_up()
        entries = response[0][1] if response else []
        if not entries:
            self.empty_reads += 1
            return
        self.reads += 1
        parked: list[Delivery] = []
        for message_id, raw in entries:
            self.take(text(message_id), raw, 1, parked, sent_at)
        self.counts.give_back(parked)

    def _room(self) -> int:
        """How many entries a read may take now. While a breaker is not closed, the reader, idle anyway, probes
        the dependency, and reads at most one entry, to be the half-open breaker's trial, when no entry it
        holds can be (none paused, none under way)."""
        breakers = self.member.breakers
        if breakers.all_closed():
            return self.scheduler.room_for_reading(batch_size=self.batch_size, allowed=True)
        self._probe_dependencies()
        allowed = breakers.ready() and self.scheduler.quiet()
        return self.scheduler.room_for_reading(batch_size=1, allowed=allowed)

    def _probe_dependencies(self) -> None:
        """Half-open breakers are probed directly (SELECT 1, PING, GET /models). Up closes the breaker; down or
        "cannot tell" is a hint: one real entry is tried next (pipeline.runtime.breaker)."""
        for name, breaker in self.member.breakers.by_name.items():
            if not breaker.needs_probe():
                continue
            verdict = dependencies.probe(name)
            breaker.probed(verdict)
            if breaker.state is State.CLOSED:
                log.info("%s: %s is back; resuming", self.member.name, name)
            elif breaker.trial:
                log.info(
                    "%s: %s probe says %s (open %.0fs); trying one entry for real",
                    self.member.name,
                    name,
                    verdict,
                    breaker.open_age(),
                )
            self._wake_keeper.set()

    def _recreate_group(self) -> None:
        try:
            self.member.ensure_group(self.consumer.start_id)
        except redis.RedisError:
            log.exception("%s: cannot create group", self.member.name)
            self._stopping.wait(1.0)

    def take(self, message_id: str, raw: RawFields | None, count: int, parked: list[Delivery], sent_at: float) -> None:
        """Take an entry this process now owns (by the command sent at `sent_at`, time.monotonic()). Hostile
        input must never stop the loop: anything unexpected gives the entry up."""
        try:
            self._accept(message_id, raw, count, parked, sent_at)
        except Exception as exc:
            log.exception("%s: cannot dispatch %s", self.member.name, message_id)
            self.scheduler.enqueue(
                self._malformed(message_id, raw or {}, count, f"undispatchable: {error_text(exc)}"), parked
            )

    def _accept(
        self, message_id: str, raw: RawFields | None, count: int, parked: list[Delivery], sent_at: float
    ) -> None:
        """Queue the entry for a handler, or (malformed, or over its deliveries) for the final hook and the
        dead letter."""
        if not raw:
            # Deleted from the stream while pending (trimmed): there is nothing to handle.
            self.acker.put(message_id)
            return
        try:
            fields = decode_fields(raw)
        except UndecodableEntry as exc:
            log.warning("%s: undecodable entry %s: %s", self.member.name, message_id, exc)
            self.scheduler.enqueue(self._malformed(message_id, raw, count, f"malformed: {exc}"), parked)
            return
        lease = self._lease(message_id)
        lease.confirm(sent_at)
        member = self.member
        try:
            event = self.consumer.parse(
                stream=member.stream,
                group=member.group,
                message_id=message_id,
                fields=fields,
                delivery_count=count,
                lease=lease,
            )
        except NotHandled as exc:
            # An event its stream carries that this group leaves to the others: acknowledged, counted, done.
            log.debug("%s: %s is not handled by %s; acknowledged", member.name, exc.event_type, member.group)
            instruments.NOT_HANDLED.labels(member.stream, member.group, exc.event_type).inc()
            self.acker.put(message_id)
            return
        except MalformedEntry as exc:
            log.warning("%s: malformed entry %s: %s", member.name, message_id, exc)
            self.scheduler.enqueue(self._malformed(message_id, raw, count, f"malformed: {exc}", fields), parked)
            return
        target = fields.get("targetgroup")
        if target and target != member.group:
            # A replay meant for another group of this stream (e.g. a requeued dead letter): not ours.
            self.acker.put(message_id)
            return
        delivery = Delivery(message_id, raw, fields, count, event, event.subject, lease)
        if self.policy.exhausted(count):
            error = f"started {count - 1} times without finishing (each handler died or lost its lease)"
            delivery.give_up(member, "transient", error)
        self.scheduler.enqueue(delivery, parked)

    def _lease(self, message_id: str) -> Lease:
        return Lease(verify=lambda: self.member.owns(message_id), trust_seconds=self._trust_seconds)

    def _malformed(
        self, message_id: str, raw: RawFields, count: int, error: str, fields: dict[str, str] | None = None
    ) -> Delivery:
        # A subject of its own: a malformed entry waits for nothing and holds nothing up.
        delivery = Delivery(message_id, raw, fields, count, None, f"\x00{message_id}", self._lease(message_id))
        delivery.give_up(self.member, "permanent", error)
        return delivery
