"""run_pipeline's database connections are bounded by its pool, whatever --concurrency: handler threads hand
their connection back after each handler and during model calls, and a thread that finds no free connection
retries its entry without counting a delivery (it never dead-letters for that)."""

from __future__ import annotations

import threading
import time

import pytest

from eigenflux.base.dbpool import PIPELINE_APPLICATION_NAME
from items.models import ItemStatus, ProcessedItem, RawItem
from pipeline.models import DeadLetter
from pipeline.relay import OutboxRelay
from tests.factories import make_agent, make_item
from tests.pgstat import ConnectionSampler, test_db_connect

pytestmark = pytest.mark.slow


def statuses(ids: list[int]) -> set[str]:
    return set(ProcessedItem.objects.filter(pk__in=ids).values_list("status", flat=True))


def test_sixteen_handler_threads_with_slow_model_calls_share_a_pool_of_two(enrich, fake_llm):
    author, _ = make_agent()
    ids = [make_item(author, f"Offering spare GPU hours, batch {n} of a bounded test").pk for n in range(16)]
    fake_llm.server.latency = 0.3  # every model call takes a while: threads spend most of their time there
    with ConnectionSampler(PIPELINE_APPLICATION_NAME) as sampler:
        enrich(PIPELINE_CONCURRENCY="16", PIPELINE_DB_POOL_MAX_SIZE="2", DB_POOL_MIN_SIZE="1")
    assert statuses(ids) == {ItemStatus.COMPLETED}
    assert sampler.samples > 10
    assert 1 <= sampler.peak <= 2
    assert fake_llm.count("process_item") == 16


def test_no_free_connection_is_retried_without_dead_lettering(enrich, fake_llm):
    author, _ = make_agent()
    ids = [make_item(author, f"Looking for a reviewer for chapter {n} of a book").pk for n in range(6)]
    assert OutboxRelay().drain() == 6  # the entries are in the stream; the relay below has nothing to do
    locker = test_db_connect(autocommit=False)
    # Both pooled connections block on this lock inside their first query; every other handler thread waits
    # PIPELINE_DB_POOL_TIMEOUT for a connection and gives up. One delivery is all an entry gets here: a
    # counted failure would dead-letter it.
    locker.execute(f"LOCK TABLE {ProcessedItem._meta.db_table}, {RawItem._meta.db_table} IN ACCESS EXCLUSIVE MODE")
    watcher = test_db_connect()

    def release_once_both_connections_wait() -> None:
        # Released only after both pooled connections are stuck on the lock, and long enough after that for
        # the other threads' pool waits (0.3 s) to run out several times: a fixed timer raced run_pipeline's
        # start-up on a loaded machine, and the lock could go before any handler had asked for a connection.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            waiting = watcher.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s AND wait_event_type = 'Lock'",
                [PIPELINE_APPLICATION_NAME],
            ).fetchone()[0]
            if waiting >= 2:
                break
            time.sleep(0.05)
        time.sleep(2.0)
        locker.rollback()

    release = threading.Thread(target=release_once_both_connections_wait)
    release.start()
    try:
        output = enrich(
            PIPELINE_CONCURRENCY="6",
            PIPELINE_DB_POOL_MAX_SIZE="2",
            PIPELINE_DB_POOL_TIMEOUT="0.3",
            PIPELINE_MAX_RETRIES="1",
        )
    finally:
        release.join()
        locker.close()
        watcher.close()
    assert "PoolTimeout" in output or "couldn't get a connection" in output
    assert statuses(ids) == {ItemStatus.COMPLETED}
    assert not DeadLetter.objects.exists()
    assert "dead-lettered" not in output
