"""The entries a runner holds (`Delivery`) and the delivery counts they carry in the group's pending list
(docs/stream-runtime.md#delivery-counts-say-how-many-attempts-started).

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

`DeliveryCounts` does the two moves (give back, spend). It takes no lock: a delivery's credit is touched by
the thread that has the delivery in hand (the reader or keeper that took it, or its worker), with one rare
exception. When our own entry went idle because Redis was unreachable for its heartbeats, the keeper's reclaim
meets it and adds the delivery XAUTOCLAIM counted (pipeline.runtime.leases, `_not_held`, under the scheduler's
lock), possibly while a worker is starting that entry; the two updates can then race, leaving the entry's count
off by one delivery.
"""

from __future__ import annotations

from dataclasses import dataclass

import redis

from pipeline.runtime.dead_lettering import GiveUp, letter_payload
from pipeline.runtime.entries import RawFields, lenient_fields
from pipeline.runtime.event import Event, Lease
from pipeline.runtime.membership import Membership
from pipeline.runtime.naming import text


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

    def give_up(self, member: Membership, error_class: str, error: str) -> GiveUp:
        """Set the verdict for this entry: what the final hook gets and the dead letter records."""
        self.verdict = GiveUp(
            stream=member.stream,
            group=member.group,
            message_id=self.message_id,
            error_class=error_class,
            error=error,
            delivery_count=self.delivery_count,
            fields=self.fields if self.fields is not None else lenient_fields(self.raw),
            payload=letter_payload(self.fields, self.raw),
        )
        return self.verdict


class DeliveryCounts:
    """Keeps each held entry's delivery count equal to the attempts that started (the module docstring)."""

    def __init__(self, member: Membership):
        self.member = member

    def set_counts(self, changes: list[tuple[Delivery, int]]) -> bool:
        """Set owned entries' delivery counts (one script call). False if Redis could not be reached."""
        if not changes:
            return True
        member = self.member
        args: list[str | int] = [member.group, member.name]
        for delivery, count in changes:
            args += [delivery.message_id, max(0, count)]
        try:
            lost = {text(mid) for mid in member.scripts.set_count(keys=[member.stream], args=args)}
        except redis.RedisError as exc:
            member.redis_down(exc, "setting delivery counts")
            return False
        for delivery, count in changes:
            if delivery.message_id in lost:
                delivery.lease.lose()
            else:
                delivery.delivery_count = max(0, count)
        return True

    def give_back(self, deliveries: list[Delivery]) -> None:
        """Give back the deliveries these entries hold without having used them."""
        owing = [d for d in deliveries if d.credit > 0]
        if self.set_counts([(d, d.delivery_count - d.credit) for d in owing]):
            for delivery in owing:
                delivery.credit = 0

    def spend(self, delivery: Delivery) -> bool:
        """Make sure the count includes the attempt about to start. False if that cannot be recorded."""
        if delivery.credit > 0:
            return True
        if not self.set_counts([(delivery, delivery.delivery_count + 1)]):
            return False
        if delivery.lease.lost:
            return False
        delivery.credit = 1
        return True
