"""The moderation history records each pipeline step once per run, however often the entry runs: a redelivered
entry (the process killed, the lease lost, an outage) decides the same passes again, and the repeats are not
written (docs/enrichment.md#decisions-and-their-order)."""

from __future__ import annotations

from collections import Counter

import pytest

from items.models import ItemStatus, ModerationDecision, ProcessedItem
from pipeline.consumers.item_publish import ItemPublishConsumer
from pipeline.runtime import LeaseLost
from pipeline.runtime.event import Lease
from tests.factories import make_agent, make_item
from tests.fakes.openai_server import Fault
from tests.pipeline.enrichment.conftest import ENRICHMENT_MODULES, kill_then_reclaim, publish_entry
from tests.pipeline.runtime.fixtures import wait_for

TASKS = ("embed", "safety", "process_item", "suggest_action")
PASSES = ["blacklist", "duplicate", "safety", "extraction", "quality"]


def history(pk: int) -> list[tuple[str, str]]:
    """The item's history as a moderator reads it: (stage, verdict), in order."""
    decisions = ModerationDecision.objects.filter(item_id=pk).order_by("created_at", "pk")
    return list(decisions.values_list("stage", "verdict"))


def passes(pk: int) -> Counter:
    return Counter(stage for stage, verdict in history(pk) if verdict == "pass")


def lost_at_check(n: int) -> Lease:
    """A lease the runtime finds lost at the n-th ownership check (before each model call and the outcome)."""
    checks = iter(range(1, 1000))
    return Lease(verify=lambda: next(checks) < n)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("lost_at", "written_before"),
    [
        (3, {"blacklist", "duplicate", "safety"}),  # before the extraction: after the safety checkpoint
        (4, set(PASSES)),  # before the outcome: the suggestion is checkpointed then, with every pass
    ],
    ids=["after-safety-checkpoint", "before-the-outcome"],
)
def test_an_entry_run_again_in_process_records_each_step_once(fake_llm, lost_at, written_before):
    pk = make_item(content="Renting out a quiet desk in a Lisbon co-working space, weekdays.").pk
    with pytest.raises(LeaseLost):
        ItemPublishConsumer().handle(publish_entry(pk, lost_at_check(lost_at)))
    assert set(passes(pk)) == written_before  # the first run's passes were written with its checkpoints

    ItemPublishConsumer().handle(publish_entry(pk, Lease()))  # the same entry, taken over by another consumer

    assert ProcessedItem.objects.get(pk=pk).status == ItemStatus.COMPLETED
    assert passes(pk) == Counter(PASSES), history(pk)
    assert {task: fake_llm.answered(task) for task in TASKS} == dict.fromkeys(TASKS, 1)


@pytest.mark.slow
def test_a_pipeline_killed_after_the_safety_checkpoint_records_each_step_once(fake_llm, run_pipeline, redis_client):
    author, _ = make_agent()
    pk = make_item(author, "Offering two hours of Rust code review a week to open-source maintainers.").pk
    fake_llm.script("process_item", Fault.stall(60))  # the first extraction never answers: killed while waiting
    env = {
        **fake_llm.env(),
        "PIPELINE_EXTRA_CONSUMER_MODULES": ENRICHMENT_MODULES,
        "PIPELINE_LEASE_SECONDS": "1.5",
        "PIPELINE_BLOCK_MS": "200",
        "LLM_TIMEOUT": "120",
    }
    first = run_pipeline("--consumer", "item-publish", "--no-housekeeping", env=env)
    wait_for(lambda: fake_llm.count("process_item") == 1, 60, message="the extraction asked for")
    assert ProcessedItem.objects.get(pk=pk).safety_passed_at is not None  # the safety checkpoint committed
    kill_then_reclaim(first, run_pipeline, redis_client, env)

    assert ProcessedItem.objects.get(pk=pk).status == ItemStatus.COMPLETED
    assert passes(pk) == Counter(PASSES), history(pk)
    assert history(pk).count(("safety", "pass")) == 1
    assert {task: fake_llm.count(task) for task in TASKS} == {
        "embed": 1,
        "safety": 1,
        "process_item": 2,
        "suggest_action": 1,
    }
