"""Consumers used only by the runtime's tests; run_pipeline imports this module via
PIPELINE_EXTRA_CONSUMER_MODULES. Effects go to a scratch table in the same transaction as consume_once, with
no unique key, so a duplicate effect would show up as a second row; progress marks go to Redis."""

from __future__ import annotations

import os
import time

from django.db import connection, transaction

from eigenflux.base.redis import get_redis
from pipeline.runtime import (
    Consumer,
    DeadLetterNow,
    Event,
    LeaseLost,
    NothingToDo,
    RetryLater,
    RetryPolicy,
    consume_once,
    register,
)

TEST_STREAM = "test:stream:effects"
TEST_GROUP = "cg:test:effects"
TEST_TYPE = "io.eigenflux.test.v1"
EFFECT_TABLE = "runtime_test_effect"

_TRACK_MAX = """
local v = redis.call('INCR', KEYS[1])
if v > tonumber(redis.call('GET', KEYS[2]) or '0') then redis.call('SET', KEYS[2], v) end
return v
"""


class LoopKiller(BaseException):
    """Not an Exception: nothing in the runtime catches it, so the thread it is raised in dies."""


@register
class EffectsConsumer(Consumer):
    """Behaviour is scripted by the event's data: sleep (s), fail ("retry", "permanent", "retry_first:N",
    "crash", "kill_thread"), nothing (bool), hang_after_commit (bool),
    sleep_first (s, first delivery only). Marks: t:attempts:<id> (times), t:order:<subject>, t:started, t:done,
    t:deliveries:<id> (the delivery count each attempt saw)."""

    name = "test-effects"
    stream = TEST_STREAM
    group = TEST_GROUP
    event_types = frozenset({TEST_TYPE})
    retry_policy = RetryPolicy(max_retries=3, base=0.3, factor=2.0, jitter=0.2)

    def handle(self, event: Event) -> None:
        r = get_redis()
        data = event.data
        r.rpush(f"t:attempts:{event.id}", f"{time.time():.6f}")
        r.rpush(f"t:deliveries:{event.id}", event.delivery_count)
        r.rpush(f"t:order:{event.subject}", str(data.get("seq", "")))
        r.rpush("t:started", event.id)
        tracker = r.register_script(_TRACK_MAX)
        # Each pair hash-tagged, so that the script also runs on a Redis Cluster (tests/cluster).
        if tracker(keys=[f"t:{{active:{event.subject}}}", f"t:{{active:{event.subject}}}:max"]) > 1:
            r.rpush("t:overlap", event.subject)
        tracker(keys=["t:{active}", "t:{active}:max"])
        try:
            self._work(event, data)
        finally:
            r.decr(f"t:{{active:{event.subject}}}")
            r.decr("t:{active}")

    def _work(self, event: Event, data: dict) -> None:
        fail = data.get("fail", "")
        if fail == "crash":
            os._exit(9)
        if fail == "kill_thread":
            raise LoopKiller("a worker thread dies")
        if fail == "retry":
            raise RetryLater("scripted transient failure")
        if fail == "permanent":
            raise DeadLetterNow("scripted permanent failure")
        if fail.startswith("retry_first:") and event.delivery_count <= int(fail.split(":")[1]):
            raise RetryLater(f"scripted failure on delivery {event.delivery_count}")
        if data.get("nothing"):
            raise NothingToDo
        sleep = float(data.get("sleep", 0)) + (float(data.get("sleep_first", 0)) if event.delivery_count == 1 else 0)
        if event.lease.cancelled.wait(sleep):
            raise LeaseLost("cancelled while working")
        event.lease.check()
        with transaction.atomic():
            if not consume_once(event):
                get_redis().rpush("t:duplicates", event.id)
                return
            with connection.cursor() as cursor:
                cursor.execute(
                    f"INSERT INTO {EFFECT_TABLE} (event_id, subject, seq, pid) VALUES (%s, %s, %s, %s)",  # noqa: S608
                    [event.id, event.subject, int(data.get("seq", 0)), os.getpid()],
                )
        get_redis().rpush("t:done", event.id)
        if data.get("hang_after_commit") and event.delivery_count == 1:
            time.sleep(60)  # effects committed, ACK not sent: the test SIGKILLs the process here


@register
class NoopConsumer(Consumer):
    """Does nothing: for malformed-entry tests and the throughput benchmark."""

    name = "test-noop"
    stream = "test:stream:noop"
    group = "cg:test:noop"
    event_types = frozenset({TEST_TYPE})

    def handle(self, event: Event) -> None:
        get_redis().rpush("t:noop", event.id)
