"""State transitions of items.services.enrichment_state that the pipeline tests cannot time precisely."""

import pytest

from items.models import DecisionStage, ItemStatus, PublicReason
from items.services.enrichment_state import Cause, Claim, claim_token, item_claim, item_complete
from tests.factories import make_agent, make_completed_item, make_item

pytestmark = pytest.mark.django_db

CAUSE = Cause(event_id="e", correlation_id="c", traceparent="")


def test_the_second_of_two_identical_items_to_persist_becomes_the_duplicate():
    author, _ = make_agent()
    racing = make_item(author, "Two identical broadcasts, enriched at the same time")
    token = claim_token(message_id="1-0", holder="h")
    state, item = item_claim(item_id=racing.pk, token=token, lease_seconds=60)
    assert state is Claim.CLAIMED
    # Meanwhile its twin, which passed the early duplicate check too, completed first.
    twin = make_completed_item(author, "two identical  broadcasts, enriched at the same time")
    assert item_complete(item=item, token=token, decisions=[], cause=CAUSE, fields={"summary": "s", "group_id": 1})
    item.refresh_from_db()
    assert (item.status, item.reason, item.duplicate_of_id) == (ItemStatus.DISCARDED, PublicReason.DUPLICATE, twin.pk)
    assert item.decisions.get().stage == DecisionStage.DUPLICATE


def test_a_moderator_approval_completes_even_a_duplicate():
    author, _ = make_agent()
    make_completed_item(author, "same words")
    approved = make_item(author, "same words")
    token = claim_token(message_id="2-0", holder="h")
    _, item = item_claim(item_id=approved.pk, token=token, lease_seconds=60)
    assert item_complete(item=item, token=token, decisions=[], cause=CAUSE, fields={}, check_duplicate=False)
    item.refresh_from_db()
    assert item.status == ItemStatus.COMPLETED


def test_a_pass_is_recorded_once_per_run_and_every_failed_attempt_and_moderator_action_each_time():
    from django.contrib.auth.models import User

    from items.services.enrichment_state import Decision, item_checkpoint, item_discard, item_release
    from items.services.moderation import item_requeue

    pk = make_item().pk

    def passed() -> list[Decision]:  # decided now
        return [Decision(DecisionStage.BLACKLIST, "pass"), Decision(DecisionStage.DUPLICATE, "pass")]

    def unsafe() -> Decision:
        return Decision(DecisionStage.SAFETY, "unsafe", "phishing", "asks for passwords")

    for attempt in ("1-0", "2-0"):  # the same steps decided again by a second delivery
        token = claim_token(message_id=attempt, holder="h")
        _, item = item_claim(item_id=pk, token=token, lease_seconds=60)
        assert item_checkpoint(item=item, token=token, decisions=passed())
        hold = Decision(DecisionStage.SAFETY, "hold", "ModelUnavailable", f"attempt {attempt}")
        assert item_release(item=item, token=token, error="safety down", decision=hold)
    token = claim_token(message_id="3-0", holder="h")
    _, item = item_claim(item_id=pk, token=token, lease_seconds=60)
    assert item_discard(item=item, token=token, decisions=[*passed(), unsafe()], cause=CAUSE)
    moderator = User.objects.create_user(username="mod-runs", is_staff=True)
    for _ in range(2):  # a moderator's requeue starts a new run, whose passes are recorded again
        requeued = item_requeue(item=item, moderator=moderator)
        token = claim_token(message_id=f"{4 + requeued.run}-0", holder="h")
        _, item = item_claim(item_id=pk, token=token, lease_seconds=60)
        assert item_checkpoint(item=item, token=token, decisions=passed())
        assert item_checkpoint(item=item, token=token, decisions=passed())
        assert item_discard(item=item, token=token, decisions=[*passed(), unsafe()], cause=CAUSE)

    rows = item.decisions.order_by("created_at", "pk").values_list("run", "stage", "verdict")
    run_0 = [(0, "blacklist", "pass"), (0, "duplicate", "pass"), (0, "safety", "hold"), (0, "safety", "hold")]
    then = [(0, "safety", "unsafe")]
    for run in (1, 2):
        then += [(run, "moderator", "requeued"), (run, "blacklist", "pass"), (run, "duplicate", "pass")]
        then += [(run, "safety", "unsafe")]
    assert list(rows) == run_0 + then


def test_a_safety_step_uncertain_in_the_review_band_is_recorded_once_per_run_like_a_pass():
    from items.services.enrichment_state import Decision, item_checkpoint, item_release

    pk = make_item().pk
    uncertain = Decision(DecisionStage.SAFETY, "uncertain", "", "risk 0.46 is in the review band")
    for attempt in ("1-0", "2-0"):  # a second delivery of the same run decides the step again
        token = claim_token(message_id=attempt, holder="h")
        _, item = item_claim(item_id=pk, token=token, lease_seconds=60)
        assert item_checkpoint(item=item, token=token, decisions=[uncertain])
        assert item_release(item=item, token=token, error="extraction down")  # retried: the same run
    assert list(item.decisions.values_list("stage", "verdict")) == [("safety", "uncertain")]
