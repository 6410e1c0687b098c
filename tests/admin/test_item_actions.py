"""Item actions through the admin, as a moderator: each one's effect (row, decision, outbox event) and its
refusals; the take-down confirmation page; the item detail page."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from django.utils.text import Truncator

from items.admin.items import AUTHOR_CHARS, EXCERPT_CHARS
from items.events import ITEM_COMPLETED, ITEM_DISCARDED, ITEM_PUBLISHED, STREAM_ITEM_EVENTS, STREAM_ITEM_PUBLISH
from items.models import Agent, DecisionStage, ItemStatus, ModerationDecision, OutboxEvent, ProcessedItem
from items.services.enrichment_state import Cause, Decision, claim_token, item_checkpoint, item_claim, item_discard
from items.services.moderation import ActionRefused, item_approve, item_requeue, item_takedown
from pipeline.models import LLMCall
from pipeline.runtime import liveness
from tests.admin.conftest import discarded, item_in, messages_of
from tests.factories import make_item

CHANGELIST = reverse("admin:items_processeditem_changelist")


def act(client, action: str, *items, **extra):
    data = {"action": action, "_selected_action": [str(i.pk) for i in items], **extra}
    return client.post(CHANGELIST, data, follow=True)


def events_for(item, event_type: str) -> list[OutboxEvent]:
    return list(OutboxEvent.objects.filter(subject=str(item.pk), event_type=event_type).order_by("id"))


def moderator_decisions(item) -> list[ModerationDecision]:
    return list(ModerationDecision.objects.filter(item=item, stage=DecisionStage.MODERATOR).order_by("id"))


# --- requeue ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [ItemStatus.DISCARDED, ItemStatus.FAILED, ItemStatus.COMPLETED])
def test_requeue_resets_the_item_and_republishes_with_replay(mod_client, moderator, status):
    item = item_in(
        status,
        reason="content_evaluation" if status == ItemStatus.DISCARDED else "",
        embedding=[0.1] * 384,
        extraction={"summary": "x"},
        safety_passed_at=timezone.now(),
        suggestion="Reply to the author.",
        suggested_at=timezone.now(),
        attempts=3,
        last_error="boom",
    )
    before = len(events_for(item, ITEM_PUBLISHED))

    response = act(mod_client, "requeue_items", item)

    assert "Requeued 1 processed item." in messages_of(response)
    item.refresh_from_db()
    assert item.status == ItemStatus.PENDING
    assert item.reason == ""
    # The model's judgements are asked for again; the embedding (same content, same model) is kept.
    assert item.extraction is None and item.safety_passed_at is None
    assert item.suggestion == "" and item.suggested_at is None
    assert item.embedding is not None and list(item.embedding) == pytest.approx([0.1] * 384)
    assert item.attempts == 0 and item.last_error == ""
    published = events_for(item, ITEM_PUBLISHED)
    assert len(published) == before + 1
    event = published[-1]
    assert event.stream == STREAM_ITEM_PUBLISH
    assert event.envelope["replay"] == "1"
    assert json.loads(event.envelope["data"]) == {"item_id": str(item.pk), "author_id": str(item.author_id)}
    [decision] = moderator_decisions(item)
    assert (decision.verdict, decision.actor, decision.moderator_id) == ("requeued", moderator.username, moderator.pk)
    assert item.run == decision.run == 1  # a new run: the pipeline's passes of this run are recorded once more


def claim(redis_client, *, alive: bool = True, pending: bool = True, lease_minutes: float = 2.0) -> dict:
    """Fields of a `processing` item claimed through a stream entry of cg:item:publish, read by consumer
    `holder`, which reports itself alive (or not); `pending=False`: the entry was finished meanwhile."""
    redis_client.xgroup_create(STREAM_ITEM_PUBLISH, "cg:item:publish", id="0", mkstream=True)
    message_id = redis_client.xadd(STREAM_ITEM_PUBLISH, {"k": "v"})
    redis_client.xreadgroup("cg:item:publish", "holder", {STREAM_ITEM_PUBLISH: ">"})
    if not pending:
        redis_client.xack(STREAM_ITEM_PUBLISH, "cg:item:publish", message_id)
    if alive:
        liveness.publish(redis_client, [{"consumer": "holder"}])
    return {"claimed_by": f"{message_id}@h1", "lease_expires_at": timezone.now() + timedelta(minutes=lease_minutes)}


@pytest.mark.parametrize("status", [ItemStatus.PENDING, ItemStatus.PROCESSING, ItemStatus.DELETED])
def test_requeue_is_refused_where_it_makes_no_sense(mod_client, redis_client, status):
    # A processing item held by a live consumer belongs to the pipeline.
    item = item_in(status, **(claim(redis_client) if status == ItemStatus.PROCESSING else {}))
    before = OutboxEvent.objects.count()

    response = act(mod_client, "requeue_items", item)

    text = " ".join(messages_of(response))
    assert "Requeued 0" in text
    assert "1 refused" in text
    assert ("deleted by its author" if status == ItemStatus.DELETED else f"it is {status}") in text
    item.refresh_from_db()
    assert item.status == status
    assert OutboxEvent.objects.count() == before
    assert moderator_decisions(item) == []


@pytest.mark.parametrize(
    "holder",
    [
        {"lease_minutes": -1},  # the claim's lease expired
        {"alive": False},  # its consumer stopped reporting alive (crashed), the entry still pending under it
        {"pending": False},  # its entry was finished (ACKed or dead-lettered) without the item moving on
    ],
    ids=["lease-expired", "consumer-gone", "entry-finished"],
)
def test_requeue_releases_a_stuck_claim_at_once(mod_client, moderator, redis_client, holder):
    item = item_in(ItemStatus.PROCESSING, attempts=2, **claim(redis_client, **holder))
    page = mod_client.get(reverse("admin:items_processeditem_change", args=[item.pk]))
    assert ("requeue_items", "Requeue", "") in page.context["item_actions"]

    response = act(mod_client, "requeue_items", item)

    assert "Requeued 1 processed item." in messages_of(response)
    item.refresh_from_db()
    assert (item.status, item.claimed_by, item.lease_expires_at, item.attempts) == (ItemStatus.PENDING, "", None, 0)
    assert events_for(item, ITEM_PUBLISHED)[-1].envelope["replay"] == "1"
    [decision] = moderator_decisions(item)
    assert decision.verdict == "requeued"


def test_bulk_requeue_counts_successes_and_lists_refusals(mod_client):
    ok = [discarded(), item_in(ItemStatus.FAILED)]
    refused = item_in(ItemStatus.PENDING)

    text = " ".join(messages_of(act(mod_client, "requeue_items", *ok, refused)))

    assert "Requeued 2" in text
    assert "1 refused" in text and f"item {refused.pk}" in text


def test_a_second_requeue_loses_the_race(moderator):
    item = discarded()
    item_requeue(item=item, moderator=moderator)
    with pytest.raises(ActionRefused, match="it is pending"):
        item_requeue(item=ProcessedItem.objects.get(pk=item.pk), moderator=moderator)


# --- approve ---------------------------------------------------------------------------------------------


def test_approve_with_extracted_fields_completes_at_once(mod_client, moderator):
    item = discarded(summary="Spare GPU hours this weekend", keywords=["gpu"], analyzer="local", quality=0.1)

    text = " ".join(messages_of(act(mod_client, "approve_items", item)))

    assert "Approved 1" in text
    item.refresh_from_db()
    assert item.status == ItemStatus.COMPLETED
    assert item.reason == ""
    assert item.processed_at is not None
    assert item.search_vector  # findable by search now
    assert item.concepts is not None  # and ranked by its lexicon concepts
    [event] = events_for(item, ITEM_COMPLETED)
    assert event.stream == STREAM_ITEM_EVENTS
    assert json.loads(event.envelope["data"])["status"] == "completed"
    assert events_for(item, ITEM_PUBLISHED)[-1].envelope["replay"] == ""  # only the original publish
    [decision] = moderator_decisions(item)
    assert (decision.verdict, decision.category, decision.actor) == ("approved", "completed", moderator.username)


def test_approve_without_extraction_sends_it_back_with_the_override(mod_client):
    item = discarded()  # discarded at a cheap gate: never extracted

    act(mod_client, "approve_items", item)

    item.refresh_from_db()
    assert item.status == ItemStatus.PENDING
    event = events_for(item, ITEM_PUBLISHED)[-1]
    assert event.envelope["replay"] == "1"
    assert json.loads(event.envelope["data"]) == {
        "item_id": str(item.pk),
        "author_id": str(item.author_id),
        "override": "approve",
    }
    assert events_for(item, ITEM_COMPLETED) == []
    [decision] = moderator_decisions(item)
    assert decision.category == "extraction_pending"
    assert item.run == decision.run == 1  # a new run: the pipeline's passes of this run are recorded once more


def test_approve_of_a_failed_item_with_only_an_extraction_checkpoint_sends_it_back(mod_client):
    # It failed after the extraction was paid for (e.g. retries ran out later): the checkpoint has the analyzer
    # but the row has no summary or keywords yet, so completing it at once would publish an empty item.
    item = item_in(ItemStatus.FAILED, analyzer="local", extraction={"summary": "Spare GPU hours"})

    act(mod_client, "approve_items", item)

    item.refresh_from_db()
    assert item.status == ItemStatus.PENDING
    assert item.extraction == {"summary": "Spare GPU hours"}  # kept: the pipeline reuses it
    assert json.loads(events_for(item, ITEM_PUBLISHED)[-1].envelope["data"])["override"] == "approve"
    assert events_for(item, ITEM_COMPLETED) == []


@pytest.mark.parametrize(
    "status", [ItemStatus.COMPLETED, ItemStatus.PENDING, ItemStatus.PROCESSING, ItemStatus.DELETED]
)
def test_approve_is_refused_where_it_makes_no_sense(mod_client, status):
    item = item_in(status, summary="s", analyzer="local")
    before = OutboxEvent.objects.count()

    text = " ".join(messages_of(act(mod_client, "approve_items", item)))

    assert "Approved 0" in text and "1 refused" in text
    item.refresh_from_db()
    assert item.status == status
    assert OutboxEvent.objects.count() == before


# --- take down -------------------------------------------------------------------------------------------


def test_take_down_asks_for_a_reason_first(mod_client):
    item = item_in(ItemStatus.COMPLETED, summary="s")

    response = act(mod_client, "take_down_items", item)

    assert response.status_code == 200
    assert b"Take down items" in response.content and b'name="reason"' in response.content
    item.refresh_from_db()
    assert item.status == ItemStatus.COMPLETED  # nothing happened yet

    blank = act(mod_client, "take_down_items", item, confirm="1", reason="   ")
    assert b"This field is required" in blank.content
    item.refresh_from_db()
    assert item.status == ItemStatus.COMPLETED


def test_take_down_discards_with_the_moderators_reason(mod_client, moderator):
    item = item_in(ItemStatus.COMPLETED, summary="s")

    response = act(mod_client, "take_down_items", item, confirm="1", reason="Phishing link reported by users")

    assert "Took down 1" in " ".join(messages_of(response))
    item.refresh_from_db()
    assert item.status == ItemStatus.DISCARDED
    assert item.reason == "content_evaluation"
    [event] = events_for(item, ITEM_DISCARDED)
    assert json.loads(event.envelope["data"])["reason"] == "content_evaluation"
    [decision] = moderator_decisions(item)
    assert (decision.verdict, decision.reason, decision.moderator_id) == (
        "taken_down",
        "Phishing link reported by users",
        moderator.pk,
    )


def test_take_down_of_an_item_being_enriched_wins_over_the_consumer(moderator):
    item = item_in(ItemStatus.PROCESSING, claimed_by="1-0@holder")
    item_takedown(item=item, moderator=moderator, reason="spam wave")
    # The consumer's later writes are conditional on processing + its claim: nothing matches any more.
    assert not ProcessedItem.objects.filter(pk=item.pk, status=ItemStatus.PROCESSING, claimed_by="1-0@holder").exists()


@pytest.mark.parametrize("status", [ItemStatus.DISCARDED, ItemStatus.DELETED])
def test_take_down_is_refused_where_it_makes_no_sense(mod_client, status):
    item = item_in(status)

    text = " ".join(messages_of(act(mod_client, "take_down_items", item, confirm="1", reason="bad")))

    assert "Took down 0" in text and "1 refused" in text
    item.refresh_from_db()
    assert item.status == status


def test_every_action_refuses_deleted_items(moderator):
    item = item_in(ItemStatus.DELETED)
    for call in (
        lambda: item_requeue(item=item, moderator=moderator),
        lambda: item_approve(item=item, moderator=moderator),
        lambda: item_takedown(item=item, moderator=moderator, reason="x"),
    ):
        with pytest.raises(ActionRefused, match="deleted by its author"):
            call()
    assert ProcessedItem.objects.get(pk=item.pk).status == ItemStatus.DELETED


# --- detail page -----------------------------------------------------------------------------------------


def test_item_page_shows_content_fields_history_model_calls_and_group(mod_client, moderator):
    first = item_in(ItemStatus.COMPLETED, summary="First of the group", group_id=None)
    ProcessedItem.objects.filter(pk=first.pk).update(group_id=first.pk)
    item = discarded(summary="Cheap GPUs", keywords=["gpu"], group_id=first.pk, analyzer="local")
    ModerationDecision.objects.create(
        item=item,
        actor="pipeline",
        stage="safety",
        verdict="flagged",
        category="fraud",
        reason="too good to be true",
        model="fake-safety",
    )
    LLMCall.objects.create(
        prompt="safety",
        model="fake-safety",
        item_id=item.pk,
        latency_ms=123.4,
        input_tokens=55,
        output_tokens=7,
        outcome="ok",
    )

    response = mod_client.get(reverse("admin:items_processeditem_change", args=[item.pk]))

    assert response.status_code == 200
    html = response.content.decode()
    assert item.raw.content in html
    assert "Cheap GPUs" in html
    assert "too good to be true" in html and "fraud" in html
    assert "123.4" in html and "fake-safety" in html  # the model call with its latency
    assert "First of the group" in html
    assert 'value="approve_items"' in html
    assert 'name="_save"' not in html  # read-only: changes go through the actions


def test_changelist_search_by_id_and_content(mod_client):
    item = item_in(ItemStatus.COMPLETED, summary="Quantum annealing time for rent")
    other = item_in(ItemStatus.COMPLETED, summary="Something else")

    by_id = mod_client.get(CHANGELIST, {"q": str(item.pk)})
    by_summary = mod_client.get(CHANGELIST, {"q": "annealing"})

    assert list(by_id.context["cl"].result_list) == [item]
    assert [i.pk for i in by_summary.context["cl"].result_list] == [item.pk]
    assert other.pk not in [i.pk for i in by_summary.context["cl"].result_list]


def test_changelist_filters_by_safety_flag_and_domain(mod_client):
    flagged = discarded(domains=["finance"])
    ModerationDecision.objects.create(
        item=flagged, actor="pipeline", stage="safety", verdict="flagged", category="phishing"
    )
    clean = item_in(ItemStatus.COMPLETED, domains=["ai"])

    by_flag = mod_client.get(CHANGELIST, {"safety_flag": "phishing"})
    by_domain = mod_client.get(CHANGELIST, {"domain": "ai"})

    assert [i.pk for i in by_flag.context["cl"].result_list] == [flagged.pk]
    assert [i.pk for i in by_domain.context["cl"].result_list] == [clean.pk]


def test_item_page_has_no_empty_submit_row(mod_client):
    """Read-only: nothing to save, so no submit row (it held only a lone "Close" under an empty bar)."""
    item = discarded(summary="Cheap GPUs")
    html = mod_client.get(reverse("admin:items_processeditem_change", args=[item.pk])).content.decode()
    assert 'class="submit-row"' not in html and "closelink" not in html
    assert 'value="take_down_items"' in html  # the actions are still there


def test_decision_history_lists_steps_in_the_order_they_ran(mod_client):
    """The pipeline writes a step's decision with its next checkpoint or the outcome, stamped with the time the
    step ran: a gate decided before the safety check is listed before it even when it is written after it."""
    raw = make_item(content="Ordering matters")
    token = claim_token(message_id="9-0", holder="h")
    _, item = item_claim(item_id=raw.pk, token=token, lease_seconds=60)
    blacklist = Decision(DecisionStage.BLACKLIST, "pass")
    duplicate = Decision(DecisionStage.DUPLICATE, "pass")
    safety = Decision(DecisionStage.SAFETY, "pass", at=timezone.now() + timedelta(seconds=1))
    assert item_checkpoint(item=item, token=token, decisions=[safety], safety_passed_at=timezone.now())
    cause = Cause(event_id="e", correlation_id="c", traceparent="")
    quality = Decision(DecisionStage.QUALITY, "discard", "low_quality", at=timezone.now() + timedelta(seconds=2))
    assert item_discard(item=item, token=token, decisions=[blacklist, duplicate, quality], cause=cause)

    response = mod_client.get(reverse("admin:items_processeditem_change", args=[item.pk]))
    shown = [d.stage for d in response.context["decisions"]]
    assert shown == [DecisionStage.BLACKLIST, DecisionStage.DUPLICATE, DecisionStage.SAFETY, DecisionStage.QUALITY]
    html = response.content.decode()
    html = html[html.index('id="decision-history"') :]  # the Outcome above names the deciding stage too
    positions = [html.index(f">{stage}</span>") for stage in ("blacklist", "duplicate", "safety", "quality")]
    assert positions == sorted(positions)


def test_items_changelist_fits_1600_px(mod_client):
    """Seven columns (the analyzer, group and processing time are on the item's page), long texts cut short."""
    long_summary = "A very long summary " * 10
    item = discarded(summary=long_summary)
    Agent.objects.filter(pk=item.author_id).update(name="An agent with a remarkably long descriptive name")

    response = mod_client.get(CHANGELIST)

    assert list(response.context["cl"].list_display) == [
        "action_checkbox",
        "id_link",
        "outcome",
        "excerpt",
        "broadcast_type",
        "quality",
        "author_name",
        "created",
    ]
    html = response.content.decode()
    excerpt = Truncator(long_summary).chars(EXCERPT_CHARS)
    assert len(excerpt) == EXCERPT_CHARS and excerpt.endswith("…") and excerpt in html
    assert long_summary not in html
    assert Truncator("An agent with a remarkably long descriptive name").chars(AUTHOR_CHARS) in html
    assert "remarkably long descriptive name" not in html
    assert timezone.localtime(item.created_at).strftime("%Y-%m-%d %H:%M") in html
    assert 'data-value="discarded"' in html and 'data-value="content_evaluation"' in html  # status and reason
