"""The pipeline's hold (docs/enrichment.md#the-review-queue): a safety pass with a middling risk, or a borderline
quality, ends the item in `review` at the persist step, a checkpoint like `completed`: once, with one history
line and one `item.held`, however often the entry is delivered, and in no more transactions than a completion."""

from __future__ import annotations

import pytest
from django.db import connection

from items.blacklist_cache import blacklist_keywords
from items.events import ITEM_COMPLETED, ITEM_DISCARDED, ITEM_HELD, STREAM_ITEM_PUBLISH
from items.models import DecisionStage, ItemStatus, ModerationDecision, OutboxEvent, ProcessedItem
from pipeline.consumers.item_publish import ItemPublishConsumer
from pipeline.runtime import NothingToDo
from pipeline.runtime.event import Lease
from tests.factories import make_agent, make_item
from tests.fakes.openai_server import DEFAULT_REPLIES, Fault
from tests.pipeline.enrichment.conftest import ENRICHMENT_MODULES, kill_then_reclaim, pending_entries, publish_entry
from tests.pipeline.enrichment.test_transactions import TransactionCounter
from tests.pipeline.runtime.fixtures import wait_for

TASKS = ("embed", "safety", "process_item", "suggest_action")
SAFE = DEFAULT_REPLIES["safety"]


def safety(risk: float | None) -> dict:
    return {**SAFE, "risk": risk} if risk is not None else SAFE


def extraction(quality: float) -> dict:
    return {**DEFAULT_REPLIES["process_item"], "quality": quality}


def held_lines(pk: int) -> list[tuple[str, str, str]]:
    rows = ModerationDecision.objects.filter(item_id=pk, stage=DecisionStage.REVIEW)
    return list(rows.values_list("actor", "verdict", "category"))


def outcomes(pk: int) -> list[str]:
    types = (ITEM_COMPLETED, ITEM_DISCARDED, ITEM_HELD)
    return list(OutboxEvent.objects.filter(subject=str(pk), event_type__in=types).values_list("event_type", flat=True))


def run_once(pk: int) -> None:
    ItemPublishConsumer().handle(publish_entry(pk, Lease()))


@pytest.fixture
def thresholds(settings):
    settings.QUALITY_THRESHOLD = 0.2
    settings.REVIEW_QUALITY_BELOW = 0.3
    settings.REVIEW_SAFETY_RISK = 0.35


@pytest.mark.django_db(transaction=True)
def test_a_safe_verdict_with_a_middling_risk_is_held_once(fake_llm, thresholds):
    fake_llm.script("safety", safety(0.6))
    pk = make_item(content="A friendly investment club: send 0.1 BTC to join, returns shared weekly.").pk
    run_once(pk)

    item = ProcessedItem.objects.get(pk=pk)
    assert (item.status, item.safety_risk) == (ItemStatus.REVIEW, 0.6)
    assert item.summary and item.keywords  # extracted: a moderator's approve publishes it
    assert (item.suggestion, item.suggested_at) == ("", None)  # asked for on approval, not for a held item
    assert item.search_vector is None  # written on approval
    assert held_lines(pk) == [("pipeline", "held", "safety_risk")]
    held = ModerationDecision.objects.get(item_id=pk, stage=DecisionStage.REVIEW).reason
    assert held == "risk 0.60 is in the review band 0.35 to 1.00 (REVIEW_SAFETY_RISK 0.35)"
    # The safety step's own line says the same: not a pass.
    safety_line = ModerationDecision.objects.get(item_id=pk, stage=DecisionStage.SAFETY)
    assert (safety_line.verdict, safety_line.reason) == (
        "uncertain",
        "risk 0.60, in the review band 0.35 to 1.00 (REVIEW_SAFETY_RISK)",
    )
    assert outcomes(pk) == [ITEM_HELD]

    with pytest.raises(NothingToDo):  # redelivered: a checkpoint, nothing more
        run_once(pk)
    assert held_lines(pk) == [("pipeline", "held", "safety_risk")]
    assert outcomes(pk) == [ITEM_HELD]
    assert {task: fake_llm.count(task) for task in TASKS} == {**dict.fromkeys(TASKS, 1), "suggest_action": 0}


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("risk", "quality", "status", "category"),
    [
        (None, 0.7, ItemStatus.COMPLETED, None),  # no risk given: a model that never says stays as it was
        (0.34, 0.7, ItemStatus.COMPLETED, None),
        (0.35, 0.7, ItemStatus.REVIEW, "safety_risk"),
        (None, 0.2, ItemStatus.REVIEW, "borderline_quality"),
        (0.1, 0.29, ItemStatus.REVIEW, "borderline_quality"),
        (None, 0.3, ItemStatus.COMPLETED, None),
        (None, 0.19, ItemStatus.DISCARDED, None),  # below the quality gate: discarded, not held
    ],
)
def test_the_thresholds(fake_llm, thresholds, risk, quality, status, category):
    fake_llm.script("safety", safety(risk))
    fake_llm.script("process_item", extraction(quality))
    pk = make_item().pk
    run_once(pk)
    assert ProcessedItem.objects.get(pk=pk).status == status
    assert held_lines(pk) == ([("pipeline", "held", category)] if category else [])


@pytest.mark.django_db(transaction=True)
def test_an_unsafe_verdict_is_discarded_whatever_its_risk(fake_llm, thresholds):
    fake_llm.script("safety", {"safe": False, "flag": "fraud", "reason": "A scam.", "risk": 0.5})
    pk = make_item().pk
    run_once(pk)
    assert ProcessedItem.objects.get(pk=pk).status == ItemStatus.DISCARDED
    assert held_lines(pk) == []


@pytest.mark.django_db(transaction=True)
def test_a_held_item_takes_no_more_transactions_than_an_accepted_one(fake_llm, thresholds):
    """The bound of test_transactions (transactions per item): the hold is the completion's transaction."""
    fake_llm.script("safety", safety(0.5))
    pk = make_item(content="Offering 40 spare A100 GPU hours this weekend, Frankfurt region.").pk
    blacklist_keywords()
    counter = TransactionCounter()
    with connection.execute_wrapper(counter):
        run_once(pk)
    assert ProcessedItem.objects.get(pk=pk).status == ItemStatus.REVIEW
    assert counter.transactions <= 8, counter.first_statements


@pytest.mark.slow
def test_a_pipeline_killed_before_the_hold_holds_the_item_once(fake_llm, run_pipeline, redis_client):
    """Killed with SIGKILL after the safety checkpoint (its risk with it) while the extraction is asked for; the
    entry, delivered again, reuses the checkpoints and holds the item once, with one history line (and asks for
    no suggestion: a held item gets one when a moderator approves it)."""
    author, _ = make_agent()
    pk = make_item(author, "Join our members-only trading signal group, first week free.").pk
    fake_llm.script("safety", safety(0.5))
    fake_llm.script("process_item", Fault.stall(60))  # the first extraction never answers
    env = {
        **fake_llm.env(),
        "PIPELINE_EXTRA_CONSUMER_MODULES": ENRICHMENT_MODULES,
        "PIPELINE_LEASE_SECONDS": "1.5",
        "PIPELINE_BLOCK_MS": "200",
        "LLM_TIMEOUT": "120",
        "REVIEW_SAFETY_RISK": "0.35",
    }
    first = run_pipeline("--consumer", "item-publish", "--no-housekeeping", env=env)
    wait_for(lambda: fake_llm.count("process_item") == 1, 60, message="the extraction asked for")
    assert ProcessedItem.objects.get(pk=pk).safety_risk == 0.5  # the risk was checkpointed with the safety pass
    kill_then_reclaim(first, run_pipeline, redis_client, env)

    assert ProcessedItem.objects.get(pk=pk).status == ItemStatus.REVIEW
    assert held_lines(pk) == [("pipeline", "held", "safety_risk")]
    assert outcomes(pk) == [ITEM_HELD]
    assert ModerationDecision.objects.filter(item_id=pk, stage=DecisionStage.SAFETY).count() == 1
    assert {task: fake_llm.count(task) for task in TASKS} == {
        "embed": 1,
        "safety": 1,
        "process_item": 2,
        "suggest_action": 0,
    }
    assert pending_entries(redis_client) == []  # acknowledged: nothing left to deliver

    # The entry once more (as after a kill between the hold's commit and the ACK, or the sweeper's republish):
    # nothing changes and no model is asked.
    [(_, fields)] = redis_client.xrange(STREAM_ITEM_PUBLISH)
    redis_client.xadd(STREAM_ITEM_PUBLISH, fields)
    redelivered = run_pipeline("--burst", "--consumer", "item-publish", "--no-housekeeping", env=env)
    assert redelivered.wait(60) == 0
    assert held_lines(pk) == [("pipeline", "held", "safety_risk")]
    assert outcomes(pk) == [ITEM_HELD]
    assert {task: fake_llm.count(task) for task in TASKS} == {
        "embed": 1,
        "safety": 1,
        "process_item": 2,
        "suggest_action": 0,
    }


@pytest.mark.django_db(transaction=True)
def test_the_outcome_consumers_take_item_held(fake_llm, thresholds):
    """item.held goes where the other outcome events go (the author's WebSocket, the audit copy): a type a group
    does not declare would be dead-lettered there as malformed."""
    from pipeline.consumers.audit import AuditConsumer
    from pipeline.consumers.item_notify import ItemNotifyConsumer
    from pipeline.runtime.event import parse_entry

    fake_llm.script("safety", safety(0.9))
    pk = make_item().pk
    run_once(pk)
    envelope = OutboxEvent.objects.get(subject=str(pk), event_type=ITEM_HELD).envelope
    for consumer in (ItemNotifyConsumer, AuditConsumer):
        event = parse_entry(
            stream=consumer.stream,
            group=consumer.group,
            message_id="1-1",
            fields=envelope,
            delivery_count=1,
            event_types=consumer.event_types,
            lease=Lease(),
        )
        assert (event.type, event.data["status"]) == (ITEM_HELD, "review")


def test_the_safety_verdict_may_carry_a_risk_and_the_prompt_asks_for_it():
    """An omitted risk stays valid (a model that never gives one); a given one is 0-1; the prompt asks for it."""
    from pydantic import ValidationError

    from pipeline.llm.prompts import example_output, prompt_source
    from pipeline.llm.schemas import SafetyVerdict

    assert SafetyVerdict.model_validate(SAFE).risk is None
    assert SafetyVerdict.model_validate({**SAFE, "risk": 0.4}).risk == 0.4
    for bad in (1.5, -0.1, "0.4"):
        with pytest.raises(ValidationError):
            SafetyVerdict.model_validate({**SAFE, "risk": bad})
    assert '"risk"' in prompt_source("safety")
    assert SafetyVerdict.model_validate(example_output("safety")).risk is not None


def spam(confidence: float | None, reason: str = "spam") -> dict:
    reply = {**DEFAULT_REPLIES["process_item"], "discard": True, "discard_reason": reason}
    return reply if confidence is None else {**reply, "confidence": confidence}


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("reply", "status"),
    [
        (spam(0.4), ItemStatus.REVIEW),
        (spam(0.59), ItemStatus.REVIEW),
        (spam(0.6), ItemStatus.DISCARDED),
        (spam(None), ItemStatus.DISCARDED),  # a model that gives no confidence discards as before
        (spam(0.2, reason="malicious"), ItemStatus.DISCARDED),  # only spam is held; malice never waits
    ],
)
def test_a_spam_discard_the_model_is_unsure_of_is_held(fake_llm, thresholds, settings, reply, status):
    settings.REVIEW_DISCARD_CONFIDENCE_BELOW = 0.6
    fake_llm.script("process_item", reply)
    pk = make_item(content="Work from home and earn 500 a day, details by DM.").pk
    run_once(pk)
    item = ProcessedItem.objects.get(pk=pk)
    assert item.status == status
    if status == ItemStatus.REVIEW:
        assert held_lines(pk) == [("pipeline", "held", "unsure_discard")]
        assert item.summary and item.keywords  # the model filled them: an approval publishes the item
        assert outcomes(pk) == [ITEM_HELD]
        stages = ModerationDecision.objects.filter(item_id=pk).values_list("stage", "verdict")
        assert (DecisionStage.EXTRACTION, "discard") in set(stages)  # the model's verdict stays in the history
    else:
        assert held_lines(pk) == []


@pytest.mark.django_db(transaction=True)
def test_an_unsure_spam_discard_approved_by_a_moderator_is_published(fake_llm, thresholds):
    from django.contrib.auth import get_user_model

    from items.services.moderation import item_review_approve

    fake_llm.script("process_item", spam(0.3))
    pk = make_item(content="Work from home and earn 500 a day, details by DM.").pk
    run_once(pk)
    moderator = get_user_model().objects.create_user("mod-unsure", password="x", is_staff=True)
    item = item_review_approve(item=ProcessedItem.objects.get(pk=pk), moderator=moderator)
    assert item.status == ItemStatus.COMPLETED and item.search_vector is not None
    assert item.concepts is not None  # stored for the feed's ranking, as at any completion
    assert outcomes(pk) == [ITEM_HELD, ITEM_COMPLETED]


def test_the_extraction_may_carry_a_confidence_and_the_prompt_asks_for_it():
    from pydantic import ValidationError

    from pipeline.llm.prompts import example_output, prompt_source
    from pipeline.llm.schemas import Extraction

    assert Extraction.model_validate(DEFAULT_REPLIES["process_item"]).confidence is None
    for bad in (1.5, -0.1, "0.4"):
        with pytest.raises(ValidationError):
            Extraction.model_validate({**DEFAULT_REPLIES["process_item"], "confidence": bad})
    assert '"confidence"' in prompt_source("process_item")
    assert Extraction.model_validate(example_output("process_item")).confidence is not None
