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
