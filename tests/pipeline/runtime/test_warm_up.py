"""A consumer warms up before it takes work (Consumer.warm_up): the runner calls it before any of its loops reads or
reclaims an entry, and a warm-up that fails does not keep the consumer from starting. The consumers that run the
model layer warm it up (docs/model-layer.md, "Trained once, kept on disk")."""

from __future__ import annotations

import logging

import pytest

from eigenflux.base.redis import get_redis
from pipeline.runtime import Consumer, Event
from pipeline.runtime.runner import ConsumerRunner
from tests.pipeline.runtime.conftest import envelope
from tests.pipeline.runtime.consumers import TEST_TYPE
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
    with caplog.at_level(logging.ERROR, logger="pipeline.runtime.runner"):
        runner.start()
    try:
        wait_for(lambda: len(warming.seen) == 2, 10, message="the entry handled")
        # Warmed up while the entry was still unclaimed (nothing pending in the group), then handled it.
        assert warming.seen == [("warm-up", 0), ("handled", 1)]
        assert ("warm-up failed" in caplog.text) is fail
    finally:
        runner.stop(2.0)


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
