"""Exhaustion ends in `failed`, through the consumer: the final hook marks the item failed with the reason and
one outcome event, before the entry is dead-lettered; a moderator (or the dead-letter requeue) can send it
round again at once. And the suggestion is kept (written with the outcome, or checkpointed when the outcome
fails): no model call is paid twice on a redelivery."""

from __future__ import annotations

import signal

import pytest
from django.contrib.auth.models import User
from django.db import connection

from items.events import ITEM_FAILED, ITEM_PUBLISHED, STREAM_ITEM_PUBLISH
from items.models import DecisionStage, ItemStatus, OutboxEvent, ProcessedItem
from items.services.enrichment_state import claim_token, item_claim
from items.services.moderation import requeue_allowed
from pipeline.consumers.dead_letter_archive import DlqArchiver
from pipeline.consumers.item_publish import ItemPublishConsumer
from pipeline.dead_letter_table import dead_letter_requeue
from pipeline.models import DeadLetter
from pipeline.runtime import GiveUp
from pipeline.runtime.event import Lease, parse_entry
from pipeline.streams import dlq_stream
from tests.factories import make_agent, make_item
from tests.fakes.openai_server import DEFAULT_REPLIES, Fault
from tests.pipeline.enrichment.conftest import ENRICHMENT_MODULES
from tests.pipeline.runtime.fixtures import wait_for

TASKS = ("safety", "process_item", "suggest_action", "embed")


def calls(fake_llm) -> dict[str, int]:
    return {task: fake_llm.count(task) for task in TASKS}


def outcome_events(pk: int, event_type: str = ITEM_FAILED) -> list[OutboxEvent]:
    return list(OutboxEvent.objects.filter(subject=str(pk), event_type=event_type))


def publish_entries(redis_client) -> list[dict]:
    return redis_client.xpending_range(STREAM_ITEM_PUBLISH, "cg:item:publish", "-", "+", 100)


@pytest.mark.slow
def test_a_handler_killed_on_every_attempt_ends_failed_with_one_outcome_event_and_can_be_requeued_at_once(
    fake_llm, run_pipeline, redis_client
):
    author, _ = make_agent()
    pk = make_item(author, "Extraction of this one never returns in time").pk
    fake_llm.set_default("process_item", Fault.stall(60))  # killed while waiting for it, every time
    env = {
        **fake_llm.env(),
        "PIPELINE_EXTRA_CONSUMER_MODULES": ENRICHMENT_MODULES,
        "PIPELINE_LEASE_SECONDS": "1.5",
        "PIPELINE_BLOCK_MS": "200",
        "LLM_TIMEOUT": "120",
    }
    for attempt in (1, 2, 3):
        proc = run_pipeline("--consumer", "item-publish", "--no-housekeeping", env=env)
        wait_for(lambda a=attempt: fake_llm.count("process_item") == a, 40, message=f"attempt {attempt} running")
        proc.signal(signal.SIGKILL)
        assert proc.wait(10) == -signal.SIGKILL
        wait_for(lambda: all(p["time_since_delivered"] > 1600 for p in publish_entries(redis_client)), 10)
    item = ProcessedItem.objects.get(pk=pk)
    assert item.status == ItemStatus.PROCESSING  # stranded by the third kill, the claim still "held"

    last = run_pipeline("--burst", "--consumer", "item-publish", "--no-housekeeping", env=env)
    assert last.wait(40) == 0, last.output()[-3000:]

    item.refresh_from_db()
    assert item.status == ItemStatus.FAILED
    assert "started 3 times without finishing" in item.last_error
    assert len(outcome_events(pk)) == 1
    [decision] = item.decisions.filter(stage=DecisionStage.DELIVERY)
    assert (decision.verdict, decision.category) == ("failed", "transient")
    assert calls(fake_llm) == {"safety": 1, "process_item": 3, "suggest_action": 0, "embed": 1}
    [letter] = [fields for _, fields in redis_client.xrange(dlq_stream(STREAM_ITEM_PUBLISH))]
    assert (letter["subject"], letter["delivery_count"]) == (str(pk), "4")
    assert publish_entries(redis_client) == []

    # At once: the moderator's requeue is allowed, and the dead-letter requeue is not answered BUSY.
    assert requeue_allowed(item)
    assert DlqArchiver(client=redis_client).drain() == 1
    moderator = User.objects.create_user(username="mod", is_staff=True)
    dead_letter_requeue(letter=DeadLetter.objects.get(subject=str(pk)), actor=moderator)
    fake_llm.set_default("process_item", DEFAULT_REPLIES["process_item"])
    again = run_pipeline("--burst", "--consumer", "item-publish", "--no-housekeeping", env=env)
    assert again.wait(40) == 0, again.output()[-3000:]
    item.refresh_from_db()
    assert item.status == ItemStatus.COMPLETED
    # The embedding and the safety pass were kept through `failed`: only what never finished is paid for.
    assert calls(fake_llm) == {"safety": 1, "process_item": 4, "suggest_action": 1, "embed": 1}


def _event_for(item, message_id: str = "1-0"):
    envelope = OutboxEvent.objects.get(subject=str(item.pk), event_type=ITEM_PUBLISHED).envelope
    return parse_entry(
        stream=STREAM_ITEM_PUBLISH,
        group="cg:item:publish",
        message_id=message_id,
        fields=envelope,
        delivery_count=4,
        event_types=frozenset({ITEM_PUBLISHED}),
        lease=Lease(),
    )


def _reason(message_id: str = "1-0") -> GiveUp:
    return GiveUp(
        stream=STREAM_ITEM_PUBLISH,
        group="cg:item:publish",
        message_id=message_id,
        error_class="transient",
        error="started 3 times without finishing",
        delivery_count=4,
    )


@pytest.mark.django_db(transaction=True)
def test_the_final_hook_fails_the_item_exactly_once():
    item = make_item()
    consumer = ItemPublishConsumer()
    item_claim(item_id=item.pk, token=claim_token(message_id="1-0", holder="dead"), lease_seconds=120)
    for _ in range(3):  # the runtime may call it again (a crash before the dead letter was written)
        consumer.on_dead_letter(_event_for(item), _reason())
    processed = ProcessedItem.objects.get(pk=item.pk)
    assert processed.status == ItemStatus.FAILED and processed.claimed_by == ""
    assert len(outcome_events(item.pk)) == 1
    assert processed.decisions.filter(stage=DecisionStage.DELIVERY).count() == 1
    consumer.on_dead_letter(None, _reason())  # a malformed entry: nothing to fail, nothing raised


@pytest.mark.django_db(transaction=True)
def test_the_final_hook_leaves_alone_an_item_another_live_entry_holds_or_that_finished():
    held, done = make_item(), make_item()
    item_claim(item_id=held.pk, token=claim_token(message_id="9-0", holder="alive"), lease_seconds=120)
    ProcessedItem.objects.filter(pk=done.pk).update(status=ItemStatus.COMPLETED)
    consumer = ItemPublishConsumer()
    consumer.on_dead_letter(_event_for(held), _reason("1-0"))
    consumer.on_dead_letter(_event_for(done), _reason("1-0"))
    assert ProcessedItem.objects.get(pk=held.pk).status == ItemStatus.PROCESSING
    assert ProcessedItem.objects.get(pk=done.pk).status == ItemStatus.COMPLETED
    assert outcome_events(held.pk) == [] and outcome_events(done.pk) == []


@pytest.fixture
def fail_first_completion(transactional_db):
    """A real trigger: the first UPDATE that completes an item fails (as a database error at persist would)."""
    with connection.cursor() as cursor:
        cursor.execute("CREATE SEQUENCE IF NOT EXISTS test_fail_completion_seq")
        cursor.execute(
            """CREATE OR REPLACE FUNCTION test_fail_completion() RETURNS trigger AS $$
            BEGIN
              IF nextval('test_fail_completion_seq') = 1 THEN RAISE EXCEPTION 'injected failure at persist'; END IF;
              RETURN NEW;
            END $$ LANGUAGE plpgsql"""
        )
        cursor.execute(
            "CREATE TRIGGER test_fail_completion BEFORE UPDATE ON items_processeditem FOR EACH ROW "
            "WHEN (NEW.status = 'completed') EXECUTE FUNCTION test_fail_completion()"
        )
    yield
    with connection.cursor() as cursor:
        cursor.execute("DROP TRIGGER IF EXISTS test_fail_completion ON items_processeditem")
        cursor.execute("DROP FUNCTION IF EXISTS test_fail_completion()")
        cursor.execute("DROP SEQUENCE IF EXISTS test_fail_completion_seq")


@pytest.mark.slow
def test_the_suggestion_is_a_checkpoint_no_model_call_is_paid_twice(enrich, fake_llm, fail_first_completion):
    author, _ = make_agent()
    pk = make_item(author, "Selling two tickets for the Friday concert").pk
    output = enrich()
    assert "injected failure at persist" in output  # the first delivery failed after the suggestion
    done = ProcessedItem.objects.get(pk=pk)
    assert done.status == ItemStatus.COMPLETED
    assert done.suggestion == DEFAULT_REPLIES["suggest_action"]["suggestion"]
    assert calls(fake_llm) == {"safety": 1, "process_item": 1, "suggest_action": 1, "embed": 1}
