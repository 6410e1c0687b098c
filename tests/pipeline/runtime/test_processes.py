"""The runtime driven through real `manage.py run_pipeline` processes: crashes, leases, retries, dead letters,
ordering, graceful stop. Effects are rows written in the same transaction as consume_once, counted here."""

from __future__ import annotations

import itertools
import json
import signal
import socket
import time
import urllib.request
from collections import Counter

import pytest
from django.db import transaction

from items.outbox import outbox_event_create
from pipeline.streams import dlq_stream
from tests.pipeline.runtime.conftest import envelope
from tests.pipeline.runtime.consumers import TEST_GROUP, TEST_STREAM, TEST_TYPE
from tests.pipeline.runtime.fixtures import wait_for

pytestmark = pytest.mark.slow
EFFECTS = ("--consumer", "test-effects", "--no-relay", "--no-housekeeping")
DLQ = dlq_stream(TEST_STREAM)


def add(client, n=1, **data) -> list[dict]:
    events = []
    for i in range(n):
        fields = envelope(**{"subject": f"s{i}", "seq": i, **data})
        client.xadd(TEST_STREAM, fields)
        events.append(fields)
    return events


def effect_counts(effects) -> Counter:
    return Counter(event_id for event_id, *_ in effects.rows())


def pending(client) -> list[dict]:
    return client.xpending_range(TEST_STREAM, TEST_GROUP, "-", "+", 1000)


def started(client) -> list[str]:
    return client.lrange("t:started", 0, -1)


def test_burst_relays_the_outbox_then_consumes_and_exits_0(run_pipeline, test_env, effects, redis_client):
    with transaction.atomic():
        ids = [
            outbox_event_create(stream=TEST_STREAM, event_type=TEST_TYPE, subject=f"s{i % 3}", data={"seq": i}).event_id
            for i in range(30)
        ]
    proc = run_pipeline("--burst", "--consumer", "test-effects", "--concurrency", "4", env=test_env)
    assert proc.wait(30) == 0, proc.output()
    assert effect_counts(effects) == Counter({str(i): 1 for i in ids})
    assert pending(redis_client) == []
    assert "run_pipeline settings:" in proc.output() and "OUTBOX_WAKEUP = after-commit" in proc.output()


def test_sigkill_mid_handler_is_reclaimed_and_every_effect_happens_once(run_pipeline, test_env, effects, redis_client):
    slow = add(redis_client, 4, sleep_first=30)  # A is killed inside these handlers...
    committed = [envelope(subject="last", hang_after_commit=True)]  # ...and after this one's commit, before its ACK
    redis_client.xadd(TEST_STREAM, committed[0])
    victim = run_pipeline(*EFFECTS, "--concurrency", "8", env=test_env)
    wait_for(lambda: len(started(redis_client)) == 5 and effects.count() == 1, 30, message="A mid-handler")
    victim.signal(signal.SIGKILL)
    assert victim.wait(10) == -signal.SIGKILL
    assert effects.count() == 1
    assert len(pending(redis_client)) == 5

    rescuer = run_pipeline(*EFFECTS, env=test_env)
    wait_for(lambda: not pending(redis_client), 40, message="rescuer finishes everything")
    rescuer.terminate()
    assert rescuer.wait(20) == 0

    counts = effect_counts(effects)
    assert counts == Counter({e["id"]: 1 for e in slow + committed})
    assert redis_client.lrange("t:duplicates", 0, -1) == [committed[0]["id"]]  # redelivered, found consumed
    pids = {pid for *_, pid in effects.rows()}
    assert rescuer.pid in pids and victim.pid in pids
    for event in slow:
        assert redis_client.llen(f"t:attempts:{event['id']}") == 2


def test_a_live_handler_outlasting_its_lease_is_not_taken_over(run_pipeline, test_env, effects, redis_client):
    event = add(redis_client, 1, sleep=5)[0]  # > 3 leases of 1.5 s
    owner = run_pipeline(*EFFECTS, env=test_env)
    wait_for(lambda: started(redis_client), 20, message="owner starts")
    other = run_pipeline(*EFFECTS, env=test_env)  # reclaims every 0.75 s from start
    wait_for(lambda: redis_client.lrange("t:done", 0, -1), 20, message="owner finishes")
    owner.terminate()
    other.terminate()
    assert owner.wait(20) == 0 and other.wait(20) == 0
    assert redis_client.llen(f"t:attempts:{event['id']}") == 1
    assert [(eid, pid) for eid, _, _, pid in effects.rows()] == [(event["id"], owner.pid)]
    assert pending(redis_client) == []


def test_when_ownership_is_stolen_the_first_handler_commits_nothing(run_pipeline, test_env, effects, redis_client):
    event = add(redis_client, 1, sleep_first=4)[0]
    owner = run_pipeline(*EFFECTS, env=test_env)
    wait_for(lambda: started(redis_client), 20, message="owner starts")
    message_id = pending(redis_client)[0]["message_id"]
    # A live thief: it takes the entry and keeps it fresh, as another process's heartbeat would.
    thief_until = time.monotonic() + 5.5
    while time.monotonic() < thief_until:
        redis_client.execute_command("XCLAIM", TEST_STREAM, TEST_GROUP, "thief", 0, message_id, "JUSTID")
        time.sleep(0.2)
    output = owner.output()
    assert "lost ownership" in output and "nothing committed" in output
    assert effects.count() == 0  # the owner's handler (due to commit at 4 s) was cancelled
    assert redis_client.llen("t:done") == 0

    # The thief goes quiet: after the lease timeout the owner's process reclaims it and commits it once.
    wait_for(lambda: effects.count() == 1, 15, message="reclaimed from the silent thief")
    owner.terminate()
    assert owner.wait(20) == 0
    assert [(eid, pid) for eid, _, _, pid in effects.rows()] == [(event["id"], owner.pid)]
    assert redis_client.llen(f"t:attempts:{event['id']}") == 2
    assert pending(redis_client) == []


def test_transient_failures_retry_with_growing_delays_then_dead_letter(run_pipeline, test_env, effects, redis_client):
    failing = add(redis_client, 1, fail="retry")[0]
    flaky = add(redis_client, 1, fail="retry_first:1")[0]
    permanent = add(redis_client, 1, fail="permanent")[0]
    proc = run_pipeline("--burst", *EFFECTS, env=test_env)
    assert proc.wait(30) == 0, proc.output()

    times = [float(t) for t in redis_client.lrange(f"t:attempts:{failing['id']}", 0, -1)]
    assert len(times) == 3  # max_retries = 3 deliveries
    gaps = [b - a for a, b in itertools.pairwise(times)]
    # policy: base 0.3 s, factor 2, jitter 20 %: ~0.24-0.3 s, then ~0.48-0.6 s
    assert 0.2 <= gaps[0] < gaps[1] and gaps[1] >= 0.45, gaps
    assert redis_client.llen(f"t:attempts:{permanent['id']}") == 1
    assert redis_client.llen(f"t:attempts:{flaky['id']}") == 2
    assert effect_counts(effects) == Counter({flaky["id"]: 1})

    letters = {fields["event_id"]: fields for _, fields in redis_client.xrange(DLQ)}
    assert set(letters) == {failing["id"], permanent["id"]}
    assert letters[failing["id"]]["error_class"] == "transient"
    assert letters[failing["id"]]["delivery_count"] == "3"
    assert "scripted transient failure" in letters[failing["id"]]["error"]
    assert letters[permanent["id"]]["error_class"] == "permanent"
    assert letters[permanent["id"]]["delivery_count"] == "1"
    assert letters[permanent["id"]]["group"] == TEST_GROUP and letters[permanent["id"]]["stream"] == TEST_STREAM
    assert pending(redis_client) == []


def test_malformed_entries_are_dead_lettered_and_the_loop_goes_on(run_pipeline, test_env, effects, redis_client):
    bad = {
        "missing": {k: v for k, v in envelope().items() if k != "subject"},
        "bad_json": {**envelope(), "data": "{oops"},
        "not_object": {**envelope(), "data": "[1, 2]"},
        "nested": {**envelope(), "data": "[" * 6000 + "]" * 6000},
        "unknown_type": {**envelope(), "type": "io.eigenflux.unknown.v1"},
        "oversize": {**envelope(), "data": json.dumps({"blob": "x" * 17_000})},
        "empty": {"just": "noise"},
    }
    for fields in bad.values():
        redis_client.xadd(TEST_STREAM, fields)
    good = add(redis_client, 3)
    proc = run_pipeline("--burst", *EFFECTS, env=test_env)
    assert proc.wait(30) == 0, proc.output()

    letters = [fields for _, fields in redis_client.xrange(DLQ)]
    assert len(letters) == len(bad)
    assert "RecursionError" in " ".join(letter["error"] for letter in letters)
    assert all(letter["error_class"] == "permanent" for letter in letters)
    errors = " | ".join(letter["error"] for letter in letters)
    for expected in ("missing required field(s): subject", "bad JSON", "JSON object", "unknown type", "oversize"):
        assert expected in errors
    assert effect_counts(effects) == Counter({e["id"]: 1 for e in good})
    assert pending(redis_client) == []


def test_per_subject_order_holds_while_subjects_run_in_parallel(run_pipeline, test_env, effects, redis_client):
    subjects = [f"subject-{i}" for i in range(4)]
    for seq in range(6):
        for subject in subjects:
            redis_client.xadd(TEST_STREAM, envelope(subject=subject, seq=seq, sleep=0.05))
    proc = run_pipeline("--burst", *EFFECTS, "--concurrency", "8", env=test_env)
    assert proc.wait(30) == 0, proc.output()

    for subject in subjects:
        assert redis_client.lrange(f"t:order:{subject}", 0, -1) == [str(i) for i in range(6)]
        assert redis_client.get(f"t:{{active:{subject}}}:max") == "1"
    assert redis_client.lrange("t:overlap", 0, -1) == []
    assert int(redis_client.get("t:{active}:max")) >= 3  # different subjects did run at the same time
    assert effects.count() == 24


def test_sigterm_finishes_in_flight_work_and_loses_nothing(run_pipeline, test_env, effects, redis_client):
    # Two subjects, two entries each: concurrency 2 runs a0 and b0; a1 was read with a0 and waits behind it.
    events = [envelope(subject=subject, seq=seq, sleep=1.5) for subject in ("a", "b") for seq in (0, 1)]
    ids = {}
    for fields in events:
        ids[(fields["subject"], json.loads(fields["data"])["seq"])] = redis_client.xadd(TEST_STREAM, fields)
    proc = run_pipeline(*EFFECTS, "--concurrency", "2", env=test_env)
    wait_for(lambda: len(started(redis_client)) == 2, 20, message="two handlers running")
    proc.terminate()
    assert proc.wait(15) == 0, proc.output()
    first = effect_counts(effects)
    assert len(first) == 2 and set(first.values()) == {1}  # in-flight ones finished and were ACKed
    assert set(first) == {events[0]["id"], events[2]["id"]}
    # a1 was read but never started: it stays pending, and the delivery it did not use was given back.
    still_pending = pending(redis_client)
    assert [(p["message_id"], p["times_delivered"]) for p in still_pending] == [(ids[("a", 1)], 0)]
    # b1 was never read: a read takes no more entries than there are idle handlers.

    successor = run_pipeline(*EFFECTS, env=test_env)  # reclaims a1 after the 1.5 s lease, reads b1
    wait_for(lambda: effects.count() == 4 and not pending(redis_client), 30, message="successor finishes the rest")
    successor.signal(signal.SIGINT)
    assert successor.wait(15) == 0
    assert effect_counts(effects) == Counter({e["id"]: 1 for e in events})
    assert redis_client.llen(f"t:attempts:{events[1]['id']}") == 1


def test_metrics_are_served(run_pipeline, test_env, effects, redis_client):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    add(redis_client, 3)
    redis_client.xadd(TEST_STREAM, {"broken": "1"})
    proc = run_pipeline(*EFFECTS, "--metrics-port", str(port), env=test_env)
    wait_for(lambda: effects.count() == 3 and redis_client.xlen(DLQ) == 1, 20, message="handled")

    def scrape():
        try:
            return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read().decode()
        except OSError:
            return ""

    # prometheus_client writes labels sorted by name
    acked = f'eigenflux_pipeline_messages_total{{group="{TEST_GROUP}",outcome="acked",stream="{TEST_STREAM}"}} 3.0'
    body = wait_for(lambda: (text := scrape()) and acked in text and text, 10, message=f"{acked} in metrics")
    proc.terminate()
    assert proc.wait(15) == 0
    letters = (
        f'eigenflux_pipeline_dead_letters_total{{error_class="permanent",group="{TEST_GROUP}",stream="{TEST_STREAM}"}}'
    )
    assert f"{letters} 1.0" in body
    assert "eigenflux_pipeline_handle_seconds_bucket" in body


def test_an_entry_that_keeps_killing_its_process_is_dead_lettered(run_pipeline, test_env, effects, redis_client):
    """Each delivery crashes the process (os._exit in the handler); the delivery count, kept by Redis across
    processes, dead-letters it once it exceeds max_retries instead of crashing consumers forever."""
    poison = add(redis_client, 1, fail="crash")[0]
    env = {**test_env, "PIPELINE_LEASE_SECONDS": "1.0"}
    exits = []
    for _ in range(4):
        proc = run_pipeline("--burst", *EFFECTS, env=env)
        exits.append(proc.wait(30))
        if exits[-1] == 0:
            break
        # Let the dead consumer's entry go idle past the lease so the next process reclaims it.
        wait_for(lambda: all(p["time_since_delivered"] > 1100 for p in pending(redis_client)), 10, message="idle")
    assert exits == [9, 9, 9, 0]
    assert redis_client.llen(f"t:attempts:{poison['id']}") == 3
    letter = redis_client.xrange(DLQ)[0][1]
    assert (letter["event_id"], letter["error_class"], letter["delivery_count"]) == (poison["id"], "transient", "4")
    assert redis_client.xlen(DLQ) == 1
    assert effects.count() == 0
    assert pending(redis_client) == []


def test_past_the_grace_period_handlers_are_cancelled_and_entries_left_pending(
    run_pipeline, test_env, effects, redis_client
):
    add(redis_client, 1, sleep_first=60)
    proc = run_pipeline(*EFFECTS, env={**test_env, "PIPELINE_GRACE_SECONDS": "1"})
    wait_for(lambda: started(redis_client), 20, message="handler running")
    stopping = time.monotonic()
    proc.terminate()
    assert proc.wait(15) == 0, proc.output()
    assert time.monotonic() - stopping < 8
    assert "cancelling them" in proc.output()
    assert effects.count() == 0
    assert len(pending(redis_client)) == 1  # not ACKed, not dead-lettered: another process will take it
    assert redis_client.xlen(DLQ) == 0
