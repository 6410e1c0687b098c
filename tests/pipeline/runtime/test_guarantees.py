"""Delivery guarantees without holes, through real `run_pipeline` processes and in-process runners: hostile
bytes never stop a loop, deliveries count only attempts that started, a loop that dies takes its process down
(non-zero) instead of leaving a live-looking zombie, loop errors are counted and survived, and the retry
backlog in memory is capped."""

from __future__ import annotations

import base64
import json
import signal
import socket

import httpx
import pytest

from eigenflux.base.redis import get_redis
from pipeline import metrics
from pipeline.runtime import Consumer, Event, RetryLater, liveness
from pipeline.runtime.runner import ConsumerRunner
from pipeline.runtime.supervisor import Supervisor
from pipeline.streams import dlq_stream
from tests.pipeline.runtime.conftest import envelope
from tests.pipeline.runtime.consumers import TEST_GROUP, TEST_STREAM, TEST_TYPE, LoopKiller, NoopConsumer
from tests.pipeline.runtime.fixtures import wait_for

EFFECTS = ("--consumer", "test-effects", "--no-relay", "--no-housekeeping")
DLQ = dlq_stream(TEST_STREAM)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get_json(url: str) -> tuple[int, dict]:
    try:
        response = httpx.get(url, timeout=3)
    except httpx.HTTPError:
        return 0, {}
    return response.status_code, response.json()


def pending(client) -> list[dict]:
    return client.xpending_range(TEST_STREAM, TEST_GROUP, "-", "+", 1000)


def deliveries(client, event) -> list[int]:
    """The delivery count each handler attempt of this event saw."""
    return [int(n) for n in client.lrange(f"t:deliveries:{event['id']}", 0, -1)]


BAD = {b"id": b"e-bad", b"subject": b"s-bad", b"type": TEST_TYPE.encode(), b"data": b'{"note": "\xff\xfe"}'}


# --- hostile bytes -------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_non_utf8_entry_is_dead_lettered_with_all_loops_alive_and_later_items_processed(
    run_pipeline, test_env, effects, redis_client, settings
):
    raw = get_redis(settings.REDIS_URL, raw=True)
    first = [envelope(subject="a"), envelope(subject="b")]
    redis_client.xadd(TEST_STREAM, first[0])
    bad_id = raw.xadd(TEST_STREAM, BAD).decode()  # in the middle of one read
    redis_client.xadd(TEST_STREAM, first[1])
    port = free_port()
    proc = run_pipeline(*EFFECTS, "--metrics-port", str(port), env=test_env)
    wait_for(lambda: effects.count() == 2 and redis_client.xlen(DLQ) == 1, 30, message="first entries handled")

    later = [envelope(subject=f"later-{i}") for i in range(3)]
    for fields in later:
        redis_client.xadd(TEST_STREAM, fields)
    wait_for(lambda: effects.count() == 5, 30, message="later entries handled by the same process")

    [(_, letter)] = redis_client.xrange(DLQ)
    assert (letter["message_id"], letter["error_class"]) == (bad_id, "permanent")
    assert "field 'data' is not UTF-8" in letter["error"]
    payload = json.loads(letter["payload"])
    assert {base64.b64decode(k): base64.b64decode(v) for k, v in payload["_fields"]} == BAD  # byte for byte
    assert pending(redis_client) == []

    status, body = get_json(f"http://127.0.0.1:{port}/readyz")
    assert status == 200, body
    assert [c["problems"] for c in body["consumers"]] == [[]]
    [reported] = wait_for(lambda: liveness.live_consumers(redis_client), 10, message="liveness report")
    assert reported["group"] == TEST_GROUP and reported["healthy"]
    assert all(loop["alive"] for loop in reported["loops"])
    assert {"reader", "acker", "keeper", "worker-0"} <= {loop["name"] for loop in reported["loops"]}
    proc.terminate()
    assert proc.wait(20) == 0, proc.output()[-3000:]
    assert liveness.live_consumers(redis_client) == []  # a clean stop leaves the registry at once


@pytest.mark.slow
def test_reclaim_dead_letters_a_non_utf8_entry_once_and_handles_its_batch_once(
    run_pipeline, test_env, effects, redis_client, settings
):
    raw = get_redis(settings.REDIS_URL, raw=True)
    raw.xgroup_create(TEST_STREAM, TEST_GROUP, id="0", mkstream=True)
    good = [envelope(subject=f"g{i}") for i in range(3)]
    redis_client.xadd(TEST_STREAM, good[0])
    bad_id = raw.xadd(TEST_STREAM, BAD).decode()
    for fields in good[1:]:
        redis_client.xadd(TEST_STREAM, fields)
    raw.xreadgroup(TEST_GROUP, "crashed-consumer", {TEST_STREAM: ">"})  # all four pending under a dead consumer
    wait_for(lambda: all(p["time_since_delivered"] > 1600 for p in pending(redis_client)), 10, message="idle")

    proc = run_pipeline("--burst", *EFFECTS, env=test_env)
    assert proc.wait(30) == 0, proc.output()[-3000:]

    assert effects.count() == 3
    for fields in good:
        assert deliveries(redis_client, fields) == [2]  # taken over once, handled once: no count bumped per cycle
    [(_, letter)] = redis_client.xrange(DLQ)
    assert letter["message_id"] == bad_id and "not UTF-8" in letter["error"]
    assert pending(redis_client) == []


# --- delivery counts -----------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_prefetched_but_unstarted_entry_keeps_its_delivery_budget(run_pipeline, test_env, effects, redis_client):
    slow = envelope(subject="a", seq=0, sleep_first=30)
    doomed = envelope(subject="a", seq=1, fail="retry")  # read with `slow`, waits behind it (same subject)
    slow_id, doomed_id = redis_client.xadd(TEST_STREAM, slow), redis_client.xadd(TEST_STREAM, doomed)
    victim = run_pipeline(*EFFECTS, "--concurrency", "2", env=test_env)
    wait_for(lambda: redis_client.lrange("t:started", 0, -1) == [slow["id"]], 20, message="slow entry running")
    wait_for(lambda: len(pending(redis_client)) == 2, 10, message="both read")
    victim.signal(signal.SIGKILL)
    assert victim.wait(10) == -signal.SIGKILL
    counts = {p["message_id"]: p["times_delivered"] for p in pending(redis_client)}
    assert counts == {slow_id: 1, doomed_id: 0}  # the delivery it never used was given back

    wait_for(lambda: all(p["time_since_delivered"] > 1600 for p in pending(redis_client)), 10, message="idle")
    rescuer = run_pipeline("--burst", *EFFECTS, env=test_env)
    assert rescuer.wait(40) == 0, rescuer.output()[-3000:]

    assert deliveries(redis_client, doomed) == [1, 2, 3]  # its whole budget, then the dead letter
    [(_, letter)] = redis_client.xrange(DLQ)
    assert (letter["event_id"], letter["delivery_count"], letter["error_class"]) == (doomed["id"], "3", "transient")
    assert deliveries(redis_client, slow) == [1, 2]  # it did start, and was killed: that counted
    assert [event_id for event_id, *_ in effects.rows()] == [slow["id"]]


# --- loops ---------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_loop_thread_that_dies_makes_the_process_exit_non_zero(run_pipeline, test_env, effects, redis_client):
    redis_client.xadd(TEST_STREAM, envelope(subject="x", fail="kill_thread"))
    proc = run_pipeline(*EFFECTS, env=test_env)
    assert proc.wait(30) == 70, proc.output()[-3000:]
    output = proc.output()
    assert "loop thread died: test-effects: worker-" in output
    assert "LoopKiller" in output


class _FlakyKeeper(ConsumerRunner):
    """A runtime fault injected once into the keeper loop's body."""

    faults = 1

    def _reclaim(self) -> None:
        if self.faults:
            self.faults -= 1
            raise RuntimeError("injected keeper fault")
        super()._reclaim()


def test_a_loop_that_raises_is_logged_counted_and_carries_on(redis_client):
    runner = _FlakyKeeper(NoopConsumer, concurrency=2)
    counter = metrics.LOOP_ERRORS.labels(NoopConsumer.stream, NoopConsumer.group, "keeper")
    before = counter._value.get()
    runner.start()
    try:
        for i in range(3):
            redis_client.xadd(NoopConsumer.stream, envelope(subject=f"n{i}"))
        wait_for(lambda: redis_client.llen("t:noop") == 3, 10, message="entries handled")
        wait_for(lambda: counter._value.get() == before + 1, 5, message="the keeper's error counted")
        status = runner.status()
        keeper = next(loop for loop in status["loops"] if loop["name"] == "keeper")
        assert keeper["alive"] and keeper["errors"] == 1 and status["healthy"]
        assert runner.dead_loops() == []
    finally:
        runner.stop(2.0)


class _Killer(Consumer):
    name = "test-killer"
    stream = "test:stream:killer"
    group = "cg:test:killer"
    event_types = frozenset({TEST_TYPE})

    def handle(self, event: Event) -> None:
        raise LoopKiller("gone")


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # the death is the point
def test_readiness_names_a_dead_loop(redis_client):
    supervisor = Supervisor([_Killer], concurrency=1)
    runner = supervisor.runners[0]
    runner.start()
    try:
        assert supervisor.probe()[0] is True
        redis_client.xadd(_Killer.stream, envelope(subject="k"))
        wait_for(lambda: runner.dead_loops() == ["worker-0"], 10, message="the worker thread died")
        ready, body = supervisor.probe()
        assert ready is False
        assert body["consumers"][0]["problems"] == ["worker-0 dead"]
        assert supervisor._died() and supervisor.exit_status == 70
        assert "test-killer: worker-0" in supervisor.failure
    finally:
        runner.stop(1.0)


class _Unstartable(Consumer):
    name = "test-unstartable"
    stream = "test:stream:unstartable"  # made a plain string key below: its group cannot be created
    group = "cg:test:unstartable"
    event_types = frozenset({TEST_TYPE})

    def handle(self, event: Event) -> None:
        return None


def test_a_consumer_that_cannot_start_stops_those_already_started(redis_client):
    redis_client.set(_Unstartable.stream, "not a stream")
    supervisor = Supervisor([NoopConsumer, _Unstartable], concurrency=1)
    started = supervisor.runners[0]
    try:
        with pytest.raises(Exception, match="WRONGTYPE"):
            supervisor.run()
        # The consumer that did start was stopped, not left reading on its threads.
        assert [name for name in ("reader", "acker", "keeper") if started.loops.thread(name).is_alive()] == []
    finally:
        redis_client.delete(_Unstartable.stream)


# --- the retry backlog ----------------------------------------------------------------------------------------


class _AlwaysLater(Consumer):
    name = "test-always-later"
    stream = "test:stream:later"
    group = "cg:test:later"
    event_types = frozenset({TEST_TYPE})

    def handle(self, event: Event) -> None:
        raise RetryLater("not now", delay=120)


def test_the_retry_backlog_in_memory_is_capped(redis_client, settings):
    settings.PIPELINE_MAX_WAITING_RETRIES = 2
    runner = ConsumerRunner(_AlwaysLater, concurrency=2)
    runner.start()
    try:
        for i in range(5):
            redis_client.xadd(_AlwaysLater.stream, envelope(subject=f"r{i}"))

        def settled():
            status = runner.status()
            return status["held"] == 2 and status["running"] == 0 and redis_client.xlen(_AlwaysLater.stream) == 5

        wait_for(settled, 10, message="two retries held, the rest let go")
        wait_for(
            lambda: len(redis_client.xpending_range(_AlwaysLater.stream, _AlwaysLater.group, "-", "+", 10)) == 5,
            10,
            message="every entry read",
        )
        assert runner.status()["retrying"] == 2
        # The three let go stay pending (nothing lost, each charged one attempt), for whoever reclaims them.
        entries = redis_client.xpending_range(_AlwaysLater.stream, _AlwaysLater.group, "-", "+", 10)
        assert sorted(p["times_delivered"] for p in entries) == [1, 1, 1, 1, 1]
    finally:
        runner.stop(1.0)
