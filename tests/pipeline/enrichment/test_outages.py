"""Outages pause, they do not drain: with PostgreSQL or the model endpoint down for longer than the whole retry
span of an entry, a running `run_pipeline` stops taking entries and spends no deliveries (its circuit breaker
opens), resumes by itself, and every item completes — zero dead letters, no model call paid twice.

The outages here last 12 s, twice the whole retry span these tests configure (0.5 + 1 s of backoff between
three deliveries), so without the breakers every entry in flight would be dead-lettered; the 60 s outages of
docs/benchmarks.md (bench/outages.py) exercise the same mechanism for longer. PostgreSQL is taken down for the
pipeline process only, through a TCP proxy in front of the real server; the model endpoint is the fake
OpenAI-compatible server answering 503 (or dropping connections) to everyone.
"""

from __future__ import annotations

import time

import pytest

from items.models import ItemStatus, ProcessedItem
from pipeline.models import DeadLetter
from tests.factories import make_agent, make_item
from tests.fakes.openai_server import Fault
from tests.pipeline.enrichment.conftest import ENRICHMENT_MODULES
from tests.pipeline.runtime.fixtures import wait_for

pytestmark = pytest.mark.slow
ITEMS = 24
OUTAGE_SECONDS = 12
TASKS = ("safety", "process_item", "suggest_action", "embed")


def statuses(pks) -> dict[str, int]:
    counts: dict[str, int] = {}
    for status in ProcessedItem.objects.filter(pk__in=pks).values_list("status", flat=True):
        counts[status] = counts.get(status, 0) + 1
    return counts


def completed(pks) -> int:
    return ProcessedItem.objects.filter(pk__in=pks, status=ItemStatus.COMPLETED).count()


def publish(n: int, first: int = 0) -> list[int]:
    author, _ = make_agent()
    return [
        make_item(author, f"Outage test broadcast {i}: a GPU rental offer in city {i}").pk
        for i in range(first, first + n)
    ]


def start(run_pipeline, fake_llm, **env):
    return run_pipeline(
        "--consumer",
        "item-publish",
        "--no-housekeeping",
        "--concurrency",
        "4",
        env={
            **fake_llm.env(),
            "PIPELINE_EXTRA_CONSUMER_MODULES": ENRICHMENT_MODULES,
            "PIPELINE_RETRY_BASE_SECONDS": "0.5",
            "PIPELINE_LEASE_SECONDS": "5",
            "PIPELINE_BLOCK_MS": "200",
            "PIPELINE_BREAKER_MAX_OPEN_SECONDS": "4",
            # A handler waits this long for a pooled connection before the outage reaches the breaker (the
            # default 30 s would outlast the outages here, which would then only block the handlers).
            "PIPELINE_DB_POOL_TIMEOUT": "0.5",
            **env,
        },
    )


def assert_no_dead_letters_and_no_call_paid_twice(fake_llm, redis_client, pks) -> None:
    assert redis_client.xlen("{stream:item:publish}:dlq") == 0
    assert DeadLetter.objects.count() == 0
    answered = {task: fake_llm.answered(task) for task in TASKS}
    assert answered == dict.fromkeys(TASKS, len(pks)), answered  # ideal: one answered call of each per item


def test_a_postgresql_outage_pauses_enrichment_and_loses_nothing(fake_llm, run_pipeline, postgres_proxy, redis_client):
    fake_llm.server.latency = 0.1  # items in flight when the database goes away
    pks = publish(ITEMS)
    proc = start(run_pipeline, fake_llm, DATABASE_URL=postgres_proxy.database_url)
    wait_for(lambda: completed(pks) >= 4, 60, message="enrichment under way")

    postgres_proxy.down()
    time.sleep(OUTAGE_SECONDS)
    during = completed(pks)
    postgres_proxy.up()

    wait_for(lambda: completed(pks) == ITEMS, 30, message=f"every item completed after recovery: {statuses(pks)}")
    assert during < ITEMS  # the outage did hit work in progress
    output = proc.output()
    assert "postgresql is down" in output and "paused without spending a delivery" in output
    proc.terminate()
    assert proc.wait(30) == 0, output[-3000:]
    assert_no_dead_letters_and_no_call_paid_twice(fake_llm, redis_client, pks)


def test_a_single_item_in_flight_is_not_drained_by_a_postgresql_outage(
    fake_llm, run_pipeline, postgres_proxy, redis_client
):
    """One entry failing alone cannot open a breaker by numbers; the runtime asks PostgreSQL itself."""
    fake_llm.server.latency = 1.0
    [pk] = publish(1)
    proc = start(run_pipeline, fake_llm, DATABASE_URL=postgres_proxy.database_url)
    wait_for(lambda: fake_llm.count("embed") == 1, 30, message="the item is being enriched")
    postgres_proxy.down()
    time.sleep(OUTAGE_SECONDS / 2)  # four times the whole retry span
    postgres_proxy.up()
    wait_for(lambda: completed([pk]) == 1, 30, message=f"the item completed after recovery: {statuses([pk])}")
    output = proc.output()
    assert "postgresql is down" in output and "postgresql is back" in output
    proc.terminate()
    assert proc.wait(30) == 0, output[-3000:]
    assert_no_dead_letters_and_no_call_paid_twice(fake_llm, redis_client, [pk])


@pytest.mark.parametrize("fault", [Fault.server_error(503), Fault.disconnect()], ids=["503", "disconnect"])
def test_a_model_endpoint_outage_pauses_enrichment_and_loses_nothing(fake_llm, run_pipeline, redis_client, fault):
    fake_llm.server.latency = 0.1
    pks = publish(8)
    proc = start(run_pipeline, fake_llm)
    wait_for(lambda: completed(pks) >= 4, 60, message="enrichment under way")

    fake_llm.server.outage = fault
    pks += publish(ITEMS - 8, first=8)  # arriving during the outage
    time.sleep(OUTAGE_SECONDS)
    failed_requests = fake_llm.count() - fake_llm.answered()
    assert completed(pks) < ITEMS
    fake_llm.server.outage = None

    wait_for(lambda: completed(pks) == ITEMS, 30, message=f"every item completed after recovery: {statuses(pks)}")
    output = proc.output()
    assert "model is down" in output and "paused without spending a delivery" in output
    # Paused, not hammering: a probe every few seconds, not every entry retrying through its whole budget.
    assert failed_requests < 60, failed_requests
    proc.terminate()
    assert proc.wait(30) == 0, output[-3000:]
    assert_no_dead_letters_and_no_call_paid_twice(fake_llm, redis_client, pks)
