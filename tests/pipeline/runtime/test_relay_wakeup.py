"""How the relays are woken (OUTBOX_WAKEUP), against the real database and Redis: each mode wakes a relay whose poll
is 30 s long, coalesced NOTIFYs lose no commit, rolled-back work notifies no one, migration items.0015 reverses."""

from __future__ import annotations

import subprocess
import sys
import threading
from contextlib import contextmanager, suppress

import psycopg
import pytest
from django.db import connection, transaction
from django.db.migrations.executor import MigrationExecutor
from django.test import override_settings

from items.events import STREAM_ITEM_PUBLISH
from items.outbox import NOTIFY_CHANNEL, _Coalescer, outbox_event_create
from items.services.publish import item_publish
from pipeline.relay import OutboxRelay
from tests.factories import make_agent
from tests.pipeline.runtime.consumers import TEST_STREAM, TEST_TYPE
from tests.pipeline.runtime.fixtures import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

MODES = ("after-commit", "poll")
LONG_POLL = 30.0  # far longer than any wait below: only the wake-up under test can deliver in time
WOKEN_WITHIN = 5.0


@pytest.fixture(autouse=True)
def fresh_coalescer():
    """No after-commit NOTIFY sent by an earlier test counts as recent."""
    _Coalescer.last_sent = 0.0
    yield
    _Coalescer.last_sent = 0.0


@contextmanager
def running_relay():
    """An OutboxRelay.run thread with the 30 s poll, once it has found the outbox empty and is waiting."""
    relay = OutboxRelay()
    stop = threading.Event()
    thread = threading.Thread(target=relay.run, args=(stop,), kwargs={"poll_seconds": LONG_POLL}, daemon=True)
    thread.start()
    try:
        wait_for(lambda: relay.empty_rounds >= 1, 10, message="relay start")
        yield relay
    finally:
        stop.set()
        thread.join(LONG_POLL + 5)


@contextmanager
def listener():
    """A LISTEN connection of the test's own, directly on the test database."""
    params = connection.settings_dict
    conn = psycopg.connect(
        dbname=params["NAME"],
        user=params.get("USER") or None,
        password=params.get("PASSWORD") or None,
        host=params.get("HOST") or None,
        port=params.get("PORT") or None,
        autocommit=True,
    )
    conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
    try:
        yield conn
    finally:
        conn.close()


def notifications(conn: psycopg.Connection, timeout: float) -> int:
    return sum(1 for _ in conn.notifies(timeout=timeout))


def publish_one(author, n: int) -> None:
    item_publish(author=author, content=f"Wake-up test broadcast {n}: spare GPU hours in Lisbon")


@pytest.mark.parametrize("mode", MODES)
def test_each_mode_relays_a_publish_long_before_the_poll(mode, redis_client):
    """item_publish's event reaches its stream within seconds although the relay's poll is 30 s: with the wake-up
    broken (no NOTIFY, no re-drain, no adaptive interval) the relay would sleep the whole 30 s."""
    author, _ = make_agent()
    with override_settings(OUTBOX_WAKEUP=mode), running_relay():
        for n in range(1, 4):
            publish_one(author, n)
            wait_for(lambda n=n: redis_client.xlen(STREAM_ITEM_PUBLISH) >= n, WOKEN_WITHIN, message=f"{mode} #{n}")


@pytest.mark.slow
def test_coalesced_notifies_do_not_lose_the_last_commits_of_a_burst(redis_client):
    """Ten commits inside one 2 s window send one NOTIFY between them; the relay's re-drain a window after it still
    relays all ten, long before its 30 s poll."""
    author, _ = make_agent()
    wakeup = override_settings(OUTBOX_WAKEUP="after-commit", OUTBOX_NOTIFY_COALESCE_MS=2000)
    with wakeup, listener() as conn, running_relay():
        for n in range(10):
            publish_one(author, n)
        sent = notifications(conn, 0.2)
        wait_for(lambda: redis_client.xlen(STREAM_ITEM_PUBLISH) == 10, 2 + WOKEN_WITHIN, message="the burst")
    assert sent == 1, f"one NOTIFY for a burst inside one window, got {sent}"


def test_coalescing_off_sends_one_notify_per_commit():
    author, _ = make_agent()
    with override_settings(OUTBOX_WAKEUP="after-commit", OUTBOX_NOTIFY_COALESCE_MS=0), listener() as conn:
        for n in range(3):
            publish_one(author, n)
        assert notifications(conn, 0.3) == 3


class Abort(Exception):
    pass


def write_event_then_abort() -> None:
    with transaction.atomic():
        outbox_event_create(stream=TEST_STREAM, event_type=TEST_TYPE, subject="s", data={"n": 1})
        raise Abort


def commit_around_aborted_savepoint() -> None:
    with transaction.atomic(), suppress(Abort):
        write_event_then_abort()


def test_rolled_back_work_sends_no_notify():
    """A rolled-back transaction, and a rolled-back savepoint inside a committed one, notify no one; the committed
    control does."""

    def write_event() -> None:
        outbox_event_create(stream=TEST_STREAM, event_type=TEST_TYPE, subject="s", data={"n": 1})

    with override_settings(OUTBOX_WAKEUP="after-commit", OUTBOX_NOTIFY_COALESCE_MS=0), listener() as conn:
        with pytest.raises(Abort):
            write_event_then_abort()
        commit_around_aborted_savepoint()
        assert notifications(conn, 0.5) == 0
        with transaction.atomic():
            write_event()
        assert notifications(conn, 2.0) >= 1


def test_poll_mode_sends_no_notify(redis_client):
    author, _ = make_agent()
    with override_settings(OUTBOX_WAKEUP="poll"), listener() as conn:
        publish_one(author, 1)
        assert notifications(conn, 0.5) == 0


def test_the_migration_drops_the_trigger_and_reverses_to_it():
    def trigger_exists() -> bool:
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_trigger WHERE tgname = 'eigenflux_outbox_notify'")
            return cursor.fetchone()[0] == 1

    def commit_notifies() -> int:
        with listener() as conn, override_settings(OUTBOX_WAKEUP="poll"):  # the publisher itself sends nothing
            with transaction.atomic():
                outbox_event_create(stream=TEST_STREAM, event_type=TEST_TYPE, subject="s", data={})
            return notifications(conn, 0.5)

    assert not trigger_exists() and commit_notifies() == 0
    executor = MigrationExecutor(connection)
    executor.migrate([("items", "0014_decision_embedding_stage_and_time")])
    try:
        assert trigger_exists() and commit_notifies() == 1, "reversed: the trigger NOTIFYs at commit again"
    finally:
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(executor.loader.graph.leaf_nodes())
    assert not trigger_exists() and commit_notifies() == 0


@pytest.mark.slow
def test_an_unknown_wakeup_is_refused_naming_the_variable(pipeline_env):
    env = {**pipeline_env, "OUTBOX_WAKEUP": "trigger", "DJANGO_SETTINGS_MODULE": "eigenflux.settings"}
    result = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode != 0
    assert "OUTBOX_WAKEUP must be one of after-commit, poll, got 'trigger'" in result.stderr
