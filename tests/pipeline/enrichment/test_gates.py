"""docs/enrichment.md, gate by gate and outcome by outcome, through the real stream, a real `run_pipeline --burst`
process and the fake model server. Model calls are counted from the fake server's request log."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from items.events import ITEM_COMPLETED, ITEM_DISCARDED, ITEM_FAILED, ITEM_PUBLISHED, STREAM_ITEM_PUBLISH
from items.models import DecisionStage, ItemStatus, OutboxEvent, ProcessedItem, PublicReason
from items.services.blacklist import blacklist_keyword_create
from pipeline.models import LLMCall
from pipeline.streams import dlq_stream
from tests.factories import make_agent, make_completed_item, make_item
from tests.fakes.openai_server import Fault
from tests.pipeline.enrichment.conftest import at_cosine, unit

TASKS = ("safety", "process_item", "suggest_action", "embed")


def calls(fake_llm) -> dict[str, int]:
    return {task: fake_llm.count(task) for task in TASKS}


def item(pk: int) -> ProcessedItem:
    return ProcessedItem.objects.select_related("raw").get(pk=pk)


def stages(pk: int) -> list[tuple[str, str]]:
    return list(item(pk).decisions.order_by("pk").values_list("stage", "verdict"))


def outcome_types(pk: int) -> list[str]:
    return list(
        OutboxEvent.objects.filter(subject=str(pk))
        .exclude(event_type=ITEM_PUBLISHED)
        .values_list("event_type", flat=True)
    )


def dlq_entries(redis_client) -> list[dict]:
    return [fields for _, fields in redis_client.xrange(dlq_stream(STREAM_ITEM_PUBLISH))]


# --- accepted ---------------------------------------------------------------------------------------


def test_accepted_item_costs_exactly_four_model_calls_and_nothing_on_redelivery(enrich, fake_llm):
    from items.feed_ranking.concepts import item_concepts

    author, token = make_agent()
    response = Client(HTTP_AUTHORIZATION=f"Bearer {token}").post(
        "/api/v1/items/publish",
        data=json.dumps({"content": "Offering spare GPU hours this weekend in Frankfurt"}),
        content_type="application/json",
    )
    pk = int(response.json()["item_id"])
    enrich()
    done = item(pk)
    assert done.status == ItemStatus.COMPLETED
    assert calls(fake_llm) == {"safety": 1, "process_item": 1, "suggest_action": 1, "embed": 1}
    assert done.summary == "Offers spare GPU hours this weekend."
    assert done.broadcast_type == "supply"
    assert done.keywords == ["gpu", "compute", "rental"]
    assert done.suggestion == "Reply to the author with the hours you need."
    assert done.analyzer == "fake-main"
    assert done.group_id == pk
    assert done.embedding is not None and done.pending_embedding is None  # the completion moved it
    assert done.search_vector is not None
    # The lexicon concepts the feed ranks by are stored with it (not read from the text per ranking).
    assert done.concepts and done.concepts == item_concepts(done.raw.content, done.keywords)
    assert done.processed_at is not None
    # The history lists the steps in the order they ran, by time and by row alike.
    assert stages(pk) == [
        (DecisionStage.BLACKLIST, "pass"),
        (DecisionStage.DUPLICATE, "pass"),
        (DecisionStage.SAFETY, "pass"),
        (DecisionStage.EXTRACTION, "pass"),
        (DecisionStage.QUALITY, "pass"),
    ]
    by_time = done.decisions.order_by("created_at", "pk").values_list("stage", flat=True)
    assert list(by_time) == [stage for stage, _ in stages(pk)]
    assert outcome_types(pk) == [ITEM_COMPLETED]
    assert LLMCall.objects.filter(item_id=pk).count() == 4
    # The outcome event was relayed by the same burst.
    assert not OutboxEvent.objects.filter(dispatched_at__isnull=True).exists()

    # Redelivery of the published event (a replay) finds the checkpoint: no model call, no change.
    from django.db import transaction

    from items.outbox import outbox_event_create

    with transaction.atomic():
        outbox_event_create(
            stream=STREAM_ITEM_PUBLISH,
            event_type=ITEM_PUBLISHED,
            subject=str(pk),
            data={"item_id": str(pk), "author_id": str(author.pk)},
            replay=True,
        )
    enrich()
    assert calls(fake_llm) == {"safety": 1, "process_item": 1, "suggest_action": 1, "embed": 1}
    assert outcome_types(pk) == [ITEM_COMPLETED]
    assert item(pk).updated_at == done.updated_at


# --- blacklist ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fields",
    [
        {"content": "Cheap CASINO bonus codes here"},
        {"content": "Harmless text", "url": "https://casino.example/offer"},
        {"content": "Harmless text", "notes": "links to a Casino"},
    ],
)
def test_blacklisted_item_is_discarded_without_model_calls(enrich, fake_llm, fields):
    blacklist_keyword_create(keyword="casino")
    author, _ = make_agent()
    pk = make_item(author, **fields).pk
    enrich()
    done = item(pk)
    assert done.status == ItemStatus.DISCARDED
    assert done.reason == PublicReason.CONTENT_EVALUATION
    assert calls(fake_llm) == dict.fromkeys(TASKS, 0)
    decision = done.decisions.get(stage=DecisionStage.BLACKLIST)
    assert decision.verdict == "discard"
    assert "casino" in decision.reason
    assert outcome_types(pk) == [ITEM_DISCARDED]


# --- exact duplicates ------------------------------------------------------------------------------------


def test_exact_duplicate_is_discarded_free_and_referenced_for_its_author_only(enrich, fake_llm):
    alice, alice_token = make_agent()
    bob, bob_token = make_agent()
    first = make_item(alice, "Selling a used RTX 3090, EU shipping").pk
    enrich()
    assert item(first).status == ItemStatus.COMPLETED
    before = calls(fake_llm)
    again = make_item(alice, "  selling a USED rtx 3090,   eu shipping ").pk  # same after normalisation
    theirs = make_item(bob, "Selling a used RTX 3090, EU shipping").pk
    enrich()
    assert calls(fake_llm) == before, "exact duplicates must cost no model call"
    for pk in (again, theirs):
        assert item(pk).status == ItemStatus.DISCARDED
        assert item(pk).reason == PublicReason.DUPLICATE
        assert item(pk).duplicate_of_id == first
    mine = Client(HTTP_AUTHORIZATION=f"Bearer {alice_token}").get(f"/api/v1/items/{again}").json()
    assert (mine["reason"], mine["duplicate_of"]) == ("duplicate", str(first))
    other = Client(HTTP_AUTHORIZATION=f"Bearer {bob_token}").get(f"/api/v1/items/{theirs}").json()
    assert (other["reason"], other["duplicate_of"]) == ("duplicate", None)


# --- similarity grouping and its correction by type -----------------------------------------------------------


def _grouping_case(enrich, fake_llm, *, new_type, cosine, same_author, hit_age=timedelta(minutes=5)):
    alice, _ = make_agent()
    bob, _ = make_agent()
    earlier = make_completed_item(alice, "earlier broadcast", embedding=unit(1.0), broadcast_type=new_type)
    ProcessedItem.objects.filter(pk=earlier.pk).update(created_at=timezone.now() - hit_age)
    content = f"a later {new_type} broadcast"
    fake_llm.set_embedding(content, at_cosine(cosine))
    fake_llm.set_default("process_item", {**_default_extraction(), "broadcast_type": new_type})
    pk = make_item(alice if same_author else bob, content).pk
    enrich()
    done = item(pk)
    assert done.status == ItemStatus.COMPLETED
    return done.group_id == earlier.pk


def _default_extraction() -> dict:
    from tests.fakes.openai_server import DEFAULT_REPLIES

    return dict(DEFAULT_REPLIES["process_item"])


@pytest.mark.parametrize(
    ("new_type", "cosine", "same_author", "hit_age", "grouped"),
    [
        ("info", 0.80, False, timedelta(minutes=5), True),  # the default threshold, inclusive
        ("info", 0.79, False, timedelta(minutes=5), False),
        ("info", 0.95, False, timedelta(days=3), True),  # info keeps its group whatever the author and age
        ("supply", 0.95, True, timedelta(minutes=5), True),
        ("supply", 0.95, False, timedelta(minutes=5), False),  # supply/demand: same author only
        ("demand", 0.95, False, timedelta(minutes=5), False),
        ("demand", 0.95, True, timedelta(minutes=5), True),
        ("alert", 0.85, False, timedelta(minutes=5), True),  # 0.85 exactly keeps the group
        ("alert", 0.849, False, timedelta(minutes=5), False),
        ("alert", 0.95, False, timedelta(hours=5, minutes=59), True),
        ("alert", 0.95, False, timedelta(hours=6, seconds=1), False),  # not under 6 h
    ],
)
def test_similarity_grouping_and_type_corrections(enrich, fake_llm, new_type, cosine, same_author, hit_age, grouped):
    assert (
        _grouping_case(enrich, fake_llm, new_type=new_type, cosine=cosine, same_author=same_author, hit_age=hit_age)
        is grouped
    )


# --- safety -------------------------------------------------------------------------------------------------


def test_unsafe_item_is_discarded_with_its_flag_for_moderators_only(enrich, fake_llm):
    author, token = make_agent()
    fake_llm.script("safety", {"safe": False, "flag": "phishing", "reason": "asks for wallet seed phrases"})
    pk = make_item(author, "Verify your wallet at my site to claim the airdrop").pk
    enrich()
    done = item(pk)
    assert done.status == ItemStatus.DISCARDED
    assert done.reason == PublicReason.CONTENT_EVALUATION
    decision = done.decisions.get(stage=DecisionStage.SAFETY)
    assert (decision.verdict, decision.category, decision.model) == ("unsafe", "phishing", "fake-safety")
    assert fake_llm.count("process_item") == 0
    assert fake_llm.count("suggest_action") == 0
    public = Client(HTTP_AUTHORIZATION=f"Bearer {token}").get(f"/api/v1/items/{pk}").json()
    assert public["reason"] == "content_evaluation"
    assert "phishing" not in json.dumps(public)


def test_safety_outage_holds_the_item_then_dead_letters_it(enrich, fake_llm, redis_client):
    author, _ = make_agent()
    fake_llm.set_default("safety", Fault.server_error(503))
    pk = make_item(author, "An ordinary broadcast about a meetup").pk
    enrich()
    held = item(pk)
    assert held.status == ItemStatus.FAILED
    assert held.status != ItemStatus.COMPLETED
    assert fake_llm.count("process_item") == 0
    assert fake_llm.count("safety") == 3 * 3  # 3 deliveries, each 1 call + 2 client retries
    assert fake_llm.count("embed") == 1, "the embedding is checkpointed, not paid per delivery"
    verdicts = [v for s, v in stages(pk) if s == DecisionStage.SAFETY]
    assert verdicts == ["hold", "hold", "hold"]
    (letter,) = dlq_entries(redis_client)
    assert (letter["subject"], letter["group"], letter["error_class"]) == (str(pk), "cg:item:publish", "transient")
    assert outcome_types(pk) == [ITEM_FAILED]


# --- extraction ----------------------------------------------------------------------------------------------


def test_discard_verdict(enrich, fake_llm):
    author, _ = make_agent()
    fake_llm.script("process_item", {**_default_extraction(), "discard": True, "discard_reason": "spam"})
    pk = make_item(author, "BUY FOLLOWERS NOW cheap cheap cheap").pk
    enrich()
    done = item(pk)
    assert done.status == ItemStatus.DISCARDED
    assert done.reason == PublicReason.CONTENT_EVALUATION
    decision = done.decisions.get(stage=DecisionStage.EXTRACTION)
    assert (decision.verdict, decision.category) == ("discard", "spam")
    assert fake_llm.count("suggest_action") == 0


# At the threshold the item passes the gate; up to REVIEW_QUALITY_BELOW (0.3) it is held for a moderator
# (docs/enrichment.md#the-review-queue), and from there on published.
@pytest.mark.parametrize(
    ("quality", "status"),
    [(0.19, ItemStatus.DISCARDED), (0.2, ItemStatus.REVIEW), (0.3, ItemStatus.COMPLETED)],
)
def test_quality_gate_at_its_threshold(enrich, fake_llm, quality, status):
    author, _ = make_agent()
    fake_llm.script("process_item", {**_default_extraction(), "quality": quality})
    pk = make_item(author, f"a broadcast of quality {quality}").pk
    enrich()
    assert item(pk).status == status
    if status == ItemStatus.DISCARDED:
        assert item(pk).decisions.get(stage=DecisionStage.QUALITY).verdict == "discard"


def test_extraction_garbage_then_success_pays_safety_once(enrich, fake_llm):
    author, _ = make_agent()
    fake_llm.script("process_item", "I am sorry, I cannot produce JSON today.")
    pk = make_item(author, "Looking for a co-founder with Go experience").pk
    enrich()
    assert item(pk).status == ItemStatus.COMPLETED
    assert calls(fake_llm) == {"safety": 1, "process_item": 2, "suggest_action": 1, "embed": 1}
    assert (DecisionStage.EXTRACTION, "invalid") in stages(pk)


def test_embedding_failure_is_recorded_as_its_own_stage(enrich, fake_llm):
    author, _ = make_agent()
    # The embedding call and its two client retries fail; the redelivery gets the default vector.
    fake_llm.script("embed", *[Fault.server_error(500)] * 3)
    pk = make_item(author, "Looking for a Rust mentor in Lisbon").pk
    enrich()
    assert item(pk).status == ItemStatus.COMPLETED
    failure = item(pk).decisions.get(verdict="unavailable")
    assert failure.stage == DecisionStage.EMBEDDING
    assert failure.category == "ModelUnavailable"
    assert not item(pk).decisions.filter(stage=DecisionStage.EXTRACTION).exclude(verdict="pass").exists()


def test_extraction_exhausted_fails_and_dead_letters(enrich, fake_llm, redis_client):
    author, _ = make_agent()
    fake_llm.set_default("process_item", '{"summary": "cut off')
    pk = make_item(author, "Need help migrating a Postgres cluster").pk
    enrich()
    done = item(pk)
    assert done.status == ItemStatus.FAILED
    assert calls(fake_llm) == {"safety": 1, "process_item": 3, "suggest_action": 0, "embed": 1}
    (letter,) = dlq_entries(redis_client)
    assert letter["subject"] == str(pk)
    assert outcome_types(pk) == [ITEM_FAILED]
    assert done.last_error


def test_suggestion_failure_never_blocks_the_item(enrich, fake_llm):
    author, _ = make_agent()
    fake_llm.set_default("suggest_action", Fault.server_error(500))
    pk = make_item(author, "Sharing a benchmark of three vector databases").pk
    enrich()
    done = item(pk)
    assert done.status == ItemStatus.COMPLETED
    assert done.suggestion == ""
    assert fake_llm.count("suggest_action") == 3  # one call and its two client retries, no redelivery
