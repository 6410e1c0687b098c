"""A half-open breaker's trial, in-process against the real (embedded) Redis: which one entry the lease keeper or
the reader hands on to be the trial, and that nothing else starts until the trial has decided. The breakers run
on a fake clock; the Redis scripts (redelivery, delivery counts) are the real ones."""

from __future__ import annotations

import threading

import pytest

from eigenflux.base.redis import get_redis
from pipeline.llm.errors import MODEL
from pipeline.runtime import dependencies
from pipeline.runtime.breaker import Admission, Breakers, Verdict
from pipeline.runtime.deliveries import Delivery
from pipeline.runtime.leases import Keeper
from pipeline.runtime.membership import Membership
from pipeline.runtime.reading import Reader
from pipeline.runtime.scheduling import Scheduler
from tests.pipeline.runtime.test_parts import GROUP, STREAM, add, held, pending, queued, read, scheduler, shared


@pytest.fixture
def raw(redis_client):
    client = get_redis(raw=True)
    client.xgroup_create(STREAM, GROUP, id="0", mkstream=True)
    return client


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def clocked_member(client, clock: Clock) -> Membership:
    breakers = Breakers(
        dependencies.names(), no_trial=(dependencies.REDIS,), open_seconds=1.0, max_open_seconds=4.0, clock=clock
    )
    return Membership(client, stream=STREAM, group=GROUP, name="me", breakers=breakers)


def half_open(m: Membership, clock: Clock, verdict: Verdict) -> None:
    m.breakers.by_name[MODEL].trip()
    clock.now += 1.0
    m.breakers.by_name[MODEL].probed(verdict)


def keeper_of(m: Membership, s: Scheduler) -> Keeper:
    return Keeper(shared(m, s), lease_seconds=30.0, take=lambda *args: None, lost=lambda delivery: None)


def taken_by_workers(s: Scheduler) -> list[str]:
    """What the workers were handed, as if each worker had finished with it (its paused entries set aside)."""
    ids = queued(s)
    for _ in ids:
        s.work_done()
    return ids


def test_the_keeper_starts_the_oldest_paused_entry_as_the_trial_and_nothing_more_until_it_decided(raw):
    clock = Clock()
    m, s = clocked_member(raw, clock), scheduler()
    k = keeper_of(m, s)
    first, second = held("1-1", "a"), held("1-2", "b")
    for delivery in (first, second):
        s.enqueue(delivery, [])
    taken_by_workers(s)
    s.pause(first)
    s.pause(second)

    m.breakers.by_name[MODEL].trip()
    k.resume_paused()
    assert queued(s) == []  # open
    clock.now += 1.0
    k.resume_paused()
    assert queued(s) == []  # half-open, but the probe has not answered yet
    m.breakers.by_name[MODEL].probed(Verdict.DOWN)
    k.resume_paused()
    assert queued(s) == ["1-1"]  # the trial: the oldest paused entry, and only it
    k.resume_paused()
    assert queued(s) == []  # on its way to a worker: it decides first

    admission = m.breakers.admit()  # the worker admits it as the trial
    assert admission == Admission(frozenset({MODEL}))
    s.work_done()
    m.breakers.settle(admission, entry="1-1", ok={MODEL: clock.now}, failed_dependency=None)
    k.resume_paused()
    assert queued(s) == ["1-2"]  # the trial succeeded: closed, the rest resumes


def due_retry(client, s: Scheduler) -> tuple[str, Delivery]:
    (message_id,) = add(client, 1, subject=f"r{len(s.held)}")
    read(client, "me")
    delivery = held(message_id, message_id)
    s.enqueue(delivery, [])
    taken_by_workers(s)
    delivery.credit = 0  # its first attempt used its delivery
    s.later(delivery, 0)
    return message_id, delivery


def test_with_nothing_paused_the_trial_is_one_due_retry_and_its_attempt_is_counted(raw):
    clock = Clock()
    m, s = clocked_member(raw, clock), scheduler()
    k = keeper_of(m, s)
    first, _ = due_retry(raw, s)
    second, _ = due_retry(raw, s)
    half_open(m, clock, Verdict.UNKNOWN)
    k.resume_paused()
    assert queued(s) == [first]
    assert pending(raw)[first]["times_delivered"] == 2  # REDELIVER counted the attempt about to start
    assert pending(raw)[second]["times_delivered"] == 1 and len(s.retry_heap) == 1  # waits for the verdict


def test_the_reader_takes_one_new_entry_as_the_trial_only_when_nothing_it_holds_can_be(raw):
    clock = Clock()
    m = clocked_member(raw, clock)
    s = Scheduler(concurrency=3, capacity=10, wake_keeper=threading.Event())
    reader = Reader(shared(m, s), batch_size=10, block_ms=10)
    ids = add(raw, 3, subject="n")
    half_open(m, clock, Verdict.DOWN)
    reader.read_once()
    assert list(pending(raw)) == ids[:1] and queued(s) == ids[:1]  # one entry: the trial
    reader.read_once()
    assert list(pending(raw)) == ids[:1]  # the trial is on its way: nothing more is read
    m.breakers.by_name[MODEL].success()
    reader.read_once()
    assert list(pending(raw)) == ids  # closed: reads as usual
