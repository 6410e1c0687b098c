"""A proof of ownership is trusted for half a lease (pipeline.runtime.event.Lease): within it `lease.check()`
asks Redis nothing, because no consumer that follows the protocol can take an entry idle for less than a
lease; past it, the check asks Redis again (and a thief is caught). Against the real (embedded) Redis."""

from __future__ import annotations

import threading
import time

import pytest

from pipeline.runtime.acking import Acker
from pipeline.runtime.deliveries import Delivery, DeliveryCounts
from pipeline.runtime.errors import LeaseLost
from pipeline.runtime.event import Lease
from pipeline.runtime.leases import Keeper
from pipeline.runtime.reading import Reader
from pipeline.runtime.retry import RetryPolicy
from pipeline.runtime.scheduling import Scheduler
from pipeline.runtime.wiring import Shared
from tests.pipeline.runtime.consumers import NoopConsumer
from tests.pipeline.runtime.test_parts import GROUP, STREAM, add, member, raw, read, scheduler  # noqa: F401

LEASE = 0.6  # trusted for 0.3 s


class Asked:
    """Counts the ownership questions a lease puts to Redis (the real Membership.owns answers them)."""

    def __init__(self, owns):
        self.owns, self.times = owns, 0

    def __call__(self, message_id: str) -> bool:
        self.times += 1
        return self.owns(message_id)


def runner_parts(client, s: Scheduler) -> tuple[Shared, Asked]:
    m = member(client)
    asked = Asked(m.owns)
    m.owns = asked  # type: ignore[method-assign]
    shared = Shared(
        m, NoopConsumer(), RetryPolicy(max_retries=3), s, Acker(m), DeliveryCounts(m), threading.Event(),
        threading.Event(), LEASE,
    )  # fmt: skip
    return shared, asked


def started(s: Scheduler) -> Delivery:
    delivery = s.next_work(timeout=1.0)
    assert delivery is not None
    return delivery


def test_a_lease_asks_again_only_once_its_last_proof_is_older_than_its_trust():
    answers = []

    def verify() -> bool:
        answers.append(time.monotonic())
        return len(answers) < 3

    lease = Lease(verify=verify, trust_seconds=0.2)
    lease.check()  # never proven: asks
    lease.check()  # the answer it just had is a proof
    assert len(answers) == 1
    time.sleep(0.25)
    lease.check()
    assert len(answers) == 2
    time.sleep(0.25)
    with pytest.raises(LeaseLost):
        lease.check()  # the third answer is "not yours"
    assert lease.lost and lease.cancelled.is_set()


def test_without_trust_every_check_asks():
    answers = []
    lease = Lease(verify=lambda: answers.append(1) or True)
    lease.confirm(time.monotonic())
    lease.check()
    lease.check()
    assert len(answers) == 2


def test_an_entry_read_is_trusted_for_half_a_lease_then_a_thief_is_caught_by_the_check(raw):  # noqa: F811
    (message_id,) = add(raw, 1)
    s = scheduler()
    shared, asked = runner_parts(raw, s)
    Reader(shared, batch_size=10, block_ms=10).read_once()
    delivery = started(s)
    assert delivery.message_id == message_id
    delivery.lease.check()
    delivery.lease.check()
    assert asked.times == 0  # the read proved ownership
    time.sleep(LEASE / 2 + 0.05)
    delivery.lease.check()
    assert asked.times == 1  # older than half a lease: Redis is asked (and says ours)
    time.sleep(LEASE / 2 + 0.05)
    raw.xclaim(STREAM, GROUP, "thief", 0, [message_id], justid=True)
    with pytest.raises(LeaseLost):
        delivery.lease.check()
    assert asked.times == 2 and delivery.lease.lost


def test_a_heartbeat_is_a_proof_for_every_entry_it_renews_and_not_for_one_stolen(raw):  # noqa: F811
    ids = add(raw, 2)
    read(raw, "me")
    s = scheduler()
    shared, asked = runner_parts(raw, s)
    mine, stolen = (
        Delivery(mid, {}, {}, 1, None, f"s{i}", Lease(verify=lambda mid=mid: asked(mid), trust_seconds=LEASE / 2))
        for i, mid in enumerate(ids)
    )
    for delivery in (mine, stolen):
        s.enqueue(delivery, [])
    raw.xclaim(STREAM, GROUP, "thief", 0, [ids[1]], justid=True)
    Keeper(shared, lease_seconds=LEASE, take=lambda *args: None, lost=lambda delivery: None).heartbeat()
    mine.lease.check()
    assert asked.times == 0
    assert stolen.lease.lost
    with pytest.raises(LeaseLost):
        stolen.lease.check()


def test_an_entry_reclaimed_from_a_dead_consumer_is_trusted_from_the_reclaim(raw):  # noqa: F811
    (message_id,) = add(raw, 1)
    read(raw, "dead-consumer")
    time.sleep(LEASE + 0.05)  # idle past the lease: its consumer died
    s = scheduler()
    shared, asked = runner_parts(raw, s)
    reader = Reader(shared, batch_size=10, block_ms=10)
    Keeper(shared, lease_seconds=LEASE, take=reader.take, lost=lambda delivery: None).reclaim()
    delivery = started(s)
    assert delivery.message_id == message_id
    delivery.lease.check()
    assert asked.times == 0  # XAUTOCLAIM proved ownership


def test_a_redelivered_retry_is_trusted_from_the_redelivery(raw):  # noqa: F811
    (message_id,) = add(raw, 1)
    read(raw, "me")
    s = scheduler()
    shared, asked = runner_parts(raw, s)
    delivery = Delivery(
        message_id, {}, {}, 1, None, "r", Lease(verify=lambda: asked(message_id), trust_seconds=LEASE / 2)
    )
    s.enqueue(delivery, [])
    assert started(s) is delivery
    delivery.credit = 0
    s.later(delivery, 0)
    Keeper(shared, lease_seconds=LEASE, take=lambda *args: None, lost=lambda d: None).redeliver_due(
        time.monotonic() + 1
    )
    assert started(s) is delivery
    delivery.lease.check()
    assert asked.times == 0  # REDELIVER proved ownership
