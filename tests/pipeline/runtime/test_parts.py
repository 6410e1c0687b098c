"""Each part of a runner on its own, in-process, against the real (embedded) Redis: the scheduler, the ACK
batcher, the lease keeper, the delivery-count credits and the reader. No threads of a whole runner, no
subprocesses: each test drives one part through its contract and looks at Redis or at what the part handed on."""

from __future__ import annotations

import queue
import sys
import threading
import time

import pytest

from eigenflux.base.redis import get_redis
from pipeline.runtime import dependencies
from pipeline.runtime.acking import Acker
from pipeline.runtime.breaker import Breakers
from pipeline.runtime.deliveries import Delivery, DeliveryCounts
from pipeline.runtime.event import Lease
from pipeline.runtime.leases import Keeper
from pipeline.runtime.membership import Membership
from pipeline.runtime.reading import Reader
from pipeline.runtime.retry import RetryPolicy
from pipeline.runtime.scheduling import Scheduler
from pipeline.runtime.wiring import Shared
from pipeline.streams import text
from tests.pipeline.runtime.conftest import envelope
from tests.pipeline.runtime.consumers import NoopConsumer

STREAM = "test:stream:parts"
GROUP = "cg:test:parts"


def held(message_id: str, subject: str, count: int = 1) -> Delivery:
    return Delivery(message_id, {b"k": b"v"}, {"k": "v"}, count, None, subject, Lease(verify=lambda: True))


def queued(scheduler: Scheduler) -> list[str]:
    """The ids handed to the workers so far, taken off the work queue."""
    ids = []
    while True:
        try:
            delivery = scheduler.next_work(timeout=0.01)
        except queue.Empty:
            return ids
        assert delivery is not None
        ids.append(delivery.message_id)


def scheduler(concurrency: int = 4, capacity: int = 100) -> Scheduler:
    return Scheduler(concurrency=concurrency, capacity=capacity, wake_keeper=threading.Event())


# --- the scheduler -----------------------------------------------------------------------------------------------


def test_an_entry_whose_subject_is_busy_waits_and_is_handed_on_in_order_when_the_subject_frees():
    s = scheduler()
    parked: list[Delivery] = []
    a1, a2, a3, b1 = held("1-1", "a"), held("1-2", "a"), held("1-3", "a"), held("1-4", "b")
    for delivery in (a1, a2, a3, b1):
        s.enqueue(delivery, parked)
    assert queued(s) == ["1-1", "1-4"]  # one per subject; b does not wait for a
    assert parked == [a2, a3]
    s.release(a1)
    assert queued(s) == ["1-2"]
    s.release(b1)
    assert queued(s) == []  # b's queue was empty: the subject is free
    s.release(a2)
    assert queued(s) == ["1-3"]
    s.release(a3)
    assert s.busy_subjects == set() and s.held == {} and s.subject_queues == {}


def test_workers_never_run_two_entries_of_one_subject_at_once_and_run_each_subject_in_order():
    s = scheduler(concurrency=4)
    active: dict[str, int] = {}
    overlaps: list[str] = []
    order: dict[str, list[str]] = {}
    lock = threading.Lock()

    def worker() -> None:
        while (delivery := s.next_work(timeout=5)) is not None:
            with lock:
                active[delivery.subject] = active.get(delivery.subject, 0) + 1
                if active[delivery.subject] > 1:
                    overlaps.append(delivery.subject)
                order.setdefault(delivery.subject, []).append(delivery.message_id)
            time.sleep(0.005)
            with lock:
                active[delivery.subject] -= 1
            s.release(delivery)
            s.work_done()

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    expected: dict[str, list[str]] = {}
    parked: list[Delivery] = []
    for i in range(60):
        subject = "abc"[i % 3]
        expected.setdefault(subject, []).append(f"2-{i}")
        s.enqueue(held(f"2-{i}", subject), parked)
    deadline = time.monotonic() + 20
    while s.held and time.monotonic() < deadline:
        time.sleep(0.01)
    s.stop_workers(4)
    for thread in threads:
        thread.join(5)
    assert overlaps == []
    assert order == expected
    assert parked  # entries did wait behind their subject


def test_a_retry_keeps_its_subject_busy_until_it_is_due_and_finished():
    s = scheduler()
    parked: list[Delivery] = []
    a1, a2 = held("3-1", "a"), held("3-2", "a")
    s.enqueue(a1, parked)
    assert queued(s) == ["3-1"]
    assert s.later(a1, 0.05)
    s.enqueue(a2, parked)
    assert queued(s) == [] and parked == [a2]  # waits behind the retry
    assert s.take_due(time.monotonic()) is None
    time.sleep(0.06)
    assert s.take_due(time.monotonic()) is a1 and a1.retry_at is None
    s.dispatch(a1)
    assert queued(s) == ["3-1"]
    s.release(a1)
    assert queued(s) == ["3-2"]


def test_the_retry_backlog_cap_is_checked_and_taken_atomically():
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads change hands often: a check and a take that are not one step overshoot
    try:
        _retry_concurrently()
    finally:
        sys.setswitchinterval(switch)


def _retry_concurrently() -> None:
    s = scheduler()
    deliveries = [held(f"4-{i}", f"s{i}") for i in range(16)]
    start = threading.Barrier(len(deliveries))
    results: list[bool] = []

    def retry(delivery: Delivery) -> None:
        start.wait()
        results.append(s.later(delivery, 60, cap=3))

    for _ in range(30):
        s.retry_heap.clear()
        results.clear()
        threads = [threading.Thread(target=retry, args=(d,)) for d in deliveries]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert results.count(True) == 3 and len(s.retry_heap) == 3


def test_read_room_counts_idle_workers_and_not_entries_waiting_for_a_retry():
    s = scheduler(concurrency=2, capacity=3)
    parked: list[Delivery] = []
    assert s.room_for_reading(batch_size=10, allowed=True) == 2
    assert s.room_for_reading(batch_size=10, allowed=False, wait=0.01) == 0
    a, b = held("5-1", "a"), held("5-2", "b")
    s.enqueue(a, parked)
    assert s.room_for_reading(batch_size=10, allowed=True) == 1
    s.enqueue(b, parked)
    assert s.room_for_reading(batch_size=10, allowed=True, wait=0.01) == 0
    queued(s)
    s.work_done()
    s.work_done()
    assert s.later(a, 60) and s.later(b, 60)
    assert s.room_for_reading(batch_size=10, allowed=True) == 2  # waiting retries hold no worker


@pytest.fixture
def raw(redis_client):
    client = get_redis(raw=True)
    client.xgroup_create(STREAM, GROUP, id="0", mkstream=True)
    return client


def member(client, name: str = "me") -> Membership:
    breakers = Breakers(dependencies.names(), threshold=5, open_seconds=1.0, max_open_seconds=5.0)
    return Membership(client, stream=STREAM, group=GROUP, name=name, breakers=breakers)


def shared(m: Membership, s: Scheduler) -> Shared:
    policy = RetryPolicy(max_retries=3)
    return Shared(m, NoopConsumer(), policy, s, Acker(m), DeliveryCounts(m), threading.Event(), threading.Event())


def add(client, n: int, subject: str = "s") -> list[str]:
    return [text(client.xadd(STREAM, envelope(subject=f"{subject}{i}"))) for i in range(n)]


def read(client, consumer: str) -> None:
    client.xreadgroup(GROUP, consumer, {STREAM: ">"}, count=100)


def one_held(client, subject: str) -> tuple[str, Scheduler, Delivery]:
    """One entry read by this consumer ("me") and held in a fresh scheduler."""
    (message_id,) = add(client, 1)
    read(client, "me")
    s = scheduler()
    delivery = held(message_id, subject)
    s.enqueue(delivery, [])
    return message_id, s, delivery


def pending(client) -> dict[str, dict]:
    return {text(p["message_id"]): p for p in client.xpending_range(STREAM, GROUP, "-", "+", 100)}


def owner(entry: dict) -> str:
    return text(entry["consumer"])


# --- the ACK batcher ---------------------------------------------------------------------------------------------


class _Counting(Acker):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.batches: list[int] = []

    def ack_batch(self, ids: list[str]) -> bool:
        self.batches.append(len(ids))
        return super().ack_batch(ids)


def run_until_stopped(acker: Acker) -> None:
    thread = threading.Thread(target=acker.loop)
    thread.start()
    thread.join(10)
    assert not thread.is_alive()


def test_the_acker_acks_in_one_batch_only_the_entries_this_consumer_still_owns(raw):
    ids = add(raw, 5)
    read(raw, "me")
    raw.xclaim(STREAM, GROUP, "thief", 0, ids[:2], justid=True)  # two leases lost to another consumer
    acker = _Counting(member(raw))
    for message_id in ids:
        acker.put(message_id)
    acker.stop()
    run_until_stopped(acker)
    assert acker.batches == [5]
    left = pending(raw)
    assert sorted(left) == sorted(ids[:2]) and {owner(p) for p in left.values()} == {"thief"}
    assert acker.idle()


def test_the_acker_keeps_a_batch_while_redis_is_away_and_sends_it_when_back(raw):
    ids = add(raw, 3)
    read(raw, "me")
    away = get_redis("redis://127.0.0.1:1/0", raw=True)  # nothing listens there
    acker = _Counting(member(away))
    for message_id in ids:
        acker.put(message_id)
    acker.stop()
    assert not acker.ack_batch(ids)  # unreachable: not sent, not dropped
    acker.member = member(raw)
    run_until_stopped(acker)
    assert pending(raw) == {}


# --- the lease keeper ------------------------------------------------------------------------------------------


def keeper(client, s: Scheduler, *, lease_seconds: float = 30.0, name: str = "me"):
    taken: list[tuple[str, int]] = []
    lost: list[Delivery] = []

    def take(message_id: str, raw_fields, count: int, parked: list[Delivery], sent_at: float) -> None:
        taken.append((message_id, count))

    k = Keeper(shared(member(client, name), s), lease_seconds=lease_seconds, take=take, lost=lost.append)
    return k, taken, lost


def test_heartbeats_reset_the_idle_time_of_held_entries_without_counting_a_delivery_and_spot_lost_ones(raw):
    ids = add(raw, 3)
    read(raw, "me")
    s = scheduler()
    parked: list[Delivery] = []
    deliveries = [held(mid, f"h{i}") for i, mid in enumerate(ids)]
    for delivery in deliveries:
        s.enqueue(delivery, parked)
    raw.xclaim(STREAM, GROUP, "thief", 0, [ids[2]], justid=True)
    time.sleep(0.4)
    assert all(p["time_since_delivered"] >= 350 for p in pending(raw).values())
    k, _, _ = keeper(raw, s)
    k.heartbeat()
    entries = pending(raw)
    for message_id in ids[:2]:
        assert entries[message_id]["time_since_delivered"] < 200
        assert entries[message_id]["times_delivered"] == 1 and owner(entries[message_id]) == "me"
    assert [d.lease.lost for d in deliveries] == [False, False, True]
    assert deliveries[2].lease.cancelled.is_set()


def test_reclaim_takes_over_entries_idle_past_the_lease_from_a_dead_consumer_only(raw):
    dead = add(raw, 2, subject="dead")
    read(raw, "dead-consumer")
    time.sleep(0.35)
    alive = add(raw, 1, subject="alive")
    read(raw, "live-consumer")
    k, taken, _ = keeper(raw, scheduler(), lease_seconds=0.3)
    k.reclaim()
    assert sorted(taken) == sorted((mid, 2) for mid in dead)  # XAUTOCLAIM counted the second delivery
    entries = pending(raw)
    assert {owner(entries[mid]) for mid in dead} == {"me"}
    assert owner(entries[alive[0]]) == "live-consumer"
    assert k.reclaims == 1


def test_reclaim_does_not_take_its_own_idle_entry_twice_but_charges_it_the_delivery_counted(raw):
    message_id, s, delivery = one_held(raw, "own")
    delivery.credit = 0  # its handler is running: the delivery is spent
    time.sleep(0.35)  # no heartbeat (Redis away, say): idle past the lease
    k, taken, _ = keeper(raw, s, lease_seconds=0.3)
    k.reclaim()
    assert taken == []
    assert delivery.delivery_count == 2 and delivery.credit == 1  # XAUTOCLAIM's delivery, not used yet
    assert pending(raw)[message_id]["times_delivered"] == 2


def test_reclaim_takes_no_more_than_the_idle_workers(raw):
    add(raw, 5, subject="many")
    read(raw, "dead-consumer")
    time.sleep(0.35)
    k, taken, _ = keeper(raw, scheduler(concurrency=2), lease_seconds=0.3)
    k.reclaim()
    assert len(taken) == 2


def test_a_reclaim_without_a_free_worker_leaves_the_scan_unfinished_until_one_is_free(raw):
    s = scheduler(concurrency=1)
    busy = held("9-9", "busy")
    s.enqueue(busy, [])  # the one worker is taken
    k, taken, _ = keeper(raw, s, lease_seconds=0.3)
    k.reclaim()
    assert not k.scanned  # a burst run is not idle yet: entries of crashed consumers were not looked for
    queued(s)
    s.work_done()
    s.release(busy)
    k.reclaim()
    assert k.scanned and taken == []


def test_a_due_retry_is_redelivered_to_its_owner_counting_the_attempt(raw):
    message_id, s, delivery = one_held(raw, "r")
    queued(s)
    delivery.credit = 0  # the first attempt used its delivery
    s.later(delivery, 0)
    k, _, lost = keeper(raw, s)
    k.redeliver_due(time.monotonic() + 1)
    assert queued(s) == [message_id]
    assert delivery.delivery_count == 2 and delivery.credit == 1 and lost == []
    assert pending(raw)[message_id]["times_delivered"] == 2


def test_credits_go_back_for_entries_not_started_and_are_spent_when_they_start(raw):
    ids = add(raw, 2)
    read(raw, "me")
    raw.xclaim(STREAM, GROUP, "thief", 0, [ids[1]], justid=True)
    counts = DeliveryCounts(member(raw))
    mine, stolen = held(ids[0], "a"), held(ids[1], "b")
    counts.give_back([mine, stolen])
    assert mine.delivery_count == 0 and mine.credit == 0
    assert pending(raw)[ids[0]]["times_delivered"] == 0
    assert stolen.lease.lost and pending(raw)[ids[1]]["times_delivered"] == 1  # not ours: untouched
    assert counts.spend(mine)
    assert mine.delivery_count == 1 and mine.credit == 1
    assert pending(raw)[ids[0]]["times_delivered"] == 1
    assert counts.spend(mine) and pending(raw)[ids[0]]["times_delivered"] == 1  # a credit left: no new charge
    assert not counts.spend(stolen)


def test_the_reader_takes_no_more_than_idle_workers_and_gives_back_the_delivery_of_an_entry_that_waits(raw):
    for _ in range(3):
        raw.xadd(STREAM, envelope(subject="same"))
    raw.xadd(STREAM, envelope(subject="other"))
    s = scheduler(concurrency=3)
    reader = Reader(shared(member(raw), s), batch_size=10, block_ms=10)
    reader.read_once()
    entries = pending(raw)
    assert len(entries) == 3  # three workers: three entries read, the fourth left in the stream
    started = queued(s)
    assert len(started) == 1  # the other two have subject "same" and wait behind the first
    times = {mid: p["times_delivered"] for mid, p in entries.items()}
    assert times.pop(started[0]) == 1
    assert sorted(times.values()) == [0, 0]  # waiting costs nothing
    assert reader.reads == 1
