"""A consumer warms up before it takes work (Consumer.warm_up): the runner calls it before any of its loops reads or
reclaims an entry, in a thread of its own (the process's other consumers work meanwhile), and a warm-up that fails
does not keep the consumer from starting. The consumers that run the
model layer warm it up (docs/model-layer.md, "Trained once, kept on disk")."""

from __future__ import annotations

import logging
import threading

import pytest

from eigenflux.base.redis import get_redis
from pipeline.runtime import Consumer, Event
from pipeline.runtime.runner import ConsumerRunner
from tests.pipeline.runtime.conftest import envelope
from tests.pipeline.runtime.consumers import TEST_TYPE, NoopConsumer
from tests.pipeline.runtime.fixtures import wait_for

STREAM, GROUP = "test:stream:warm", "cg:test:warm"


class _Warming(Consumer):
    name = "test-warming"
    stream = STREAM
    group = GROUP
    event_types = frozenset({TEST_TYPE})
    seen: list[tuple[str, int]] = []  # (what happened, entries pending in the group at the time)
    fail = False

    def warm_up(self) -> None:
        self.seen.append(("warm-up", _pending()))
        if self.fail:
            raise RuntimeError("a dictionary is missing")

    def handle(self, event: Event) -> None:
        self.seen.append(("handled", _pending()))


def _pending() -> int:
    return int(get_redis().xpending(STREAM, GROUP)["pending"])


@pytest.fixture
def warming(redis_client):
    _Warming.seen, _Warming.fail = [], False
    redis_client.xadd(STREAM, envelope(subject="w1"))  # waiting before the consumer starts
    return _Warming


@pytest.mark.parametrize("fail", [False, True])
def test_a_consumer_warms_up_before_it_claims_its_first_entry(warming, fail, caplog):
    warming.fail = fail
    runner = ConsumerRunner(warming, concurrency=1)
    try:
        with caplog.at_level(logging.ERROR, logger="pipeline.runtime.runner"):
            runner.start()
            wait_for(lambda: len(warming.seen) == 2, 10, message="the entry handled")
        # Warmed up while the entry was still unclaimed (nothing pending in the group), then handled it.
        assert warming.seen == [("warm-up", 0), ("handled", 1)]
        assert ("warm-up failed" in caplog.text) is fail
    finally:
        runner.stop(2.0)


class _SlowWarming(_Warming):
    name = "test-slow-warming"
    release = threading.Event()

    def warm_up(self) -> None:
        self.seen.append(("warm-up", _pending()))
        self.release.wait(10)
        self.seen.append(("warmed", _pending()))


def test_other_consumers_take_work_while_one_warms_up(warming, redis_client):
    _SlowWarming.release = threading.Event()
    slow, other = ConsumerRunner(_SlowWarming, concurrency=1), ConsumerRunner(NoopConsumer, concurrency=1)
    try:
        slow.start()  # returns at once: the warm-up runs in its own thread
        other.start()
        redis_client.xadd(NoopConsumer.stream, envelope(subject="n1"))
        wait_for(lambda: redis_client.llen("t:noop") == 1, 10, message="the other consumer handled its entry")
        assert _SlowWarming.seen == [("warm-up", 0)] and _pending() == 0  # still warming, nothing claimed
        assert slow.status()["healthy"]  # waiting for the warm-up is not a stalled loop
        _SlowWarming.release.set()
        wait_for(lambda: len(_SlowWarming.seen) == 3, 10, message="the entry handled after the warm-up")
        assert _SlowWarming.seen == [("warm-up", 0), ("warmed", 0), ("handled", 1)]
    finally:
        _SlowWarming.release.set()
        slow.stop(2.0)
        other.stop(2.0)


def test_the_consumers_that_run_the_model_layer_warm_it_up(monkeypatch):
    from pipeline import llm
    from pipeline.consumers.item_publish import ItemPublishConsumer
    from pipeline.consumers.official_firstbroadcast import OfficialFirstBroadcastConsumer
    from pipeline.consumers.profile_update import ProfileUpdateConsumer

    calls = []
    monkeypatch.setattr(llm, "warm_up", lambda: calls.append(1))
    for consumer in (ItemPublishConsumer, ProfileUpdateConsumer, OfficialFirstBroadcastConsumer):
        consumer().warm_up()
    assert len(calls) == 3


def test_the_process_readiness_lists_a_consumer_until_its_warm_up_is_over(warming):
    """What `make run` waits for before its banner (eigenflux.devready): the pipeline's /readyz body."""
    from pipeline.runtime.supervisor import Supervisor

    _SlowWarming.release = threading.Event()
    supervisor = Supervisor([_SlowWarming], services=[], concurrency=1)
    thread = threading.Thread(target=supervisor.run)
    thread.start()
    try:
        wait_for(lambda: supervisor.probe()[1]["warming_up"] == ["test-slow-warming"], 10, message="warming listed")
        _SlowWarming.release.set()
        wait_for(lambda: supervisor.probe()[1]["warming_up"] == [], 10, message="no longer warming")
    finally:
        _SlowWarming.release.set()
        supervisor.request_stop()
        thread.join(30)
