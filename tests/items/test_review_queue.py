"""The review queue's transitions outside the pipeline (docs/admin.md#review-queue): a moderator's approve and
reject of a held item, readers' reports pulling a completed item into the queue, and what every read surface
shows of a held item (nothing to other agents; "review", or "processing" to the client, to its author)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.db import transaction
from django.test import Client
from django.utils import timezone

from items.events import ITEM_COMPLETED, ITEM_DISCARDED, ITEM_HELD
from items.models import Agent, DecisionStage, FeedDelivery, ItemStatus, ModerationDecision, OutboxEvent, ProcessedItem
from items.selectors import exact_duplicate_of
from items.services.feedback import item_feedback_count, reported_weight
from items.services.item_claim import Claim, item_claim_with_duplicate
from items.services.moderation import ActionRefused, item_requeue, item_review_approve, item_review_reject
from tests.factories import make_agent, make_completed_item, make_held_item, make_item
from tests.items.compat.conftest import compat  # noqa: F401 - the fixture
from tests.pipeline.enrichment.conftest import unit

pytestmark = pytest.mark.django_db


@pytest.fixture
def moderator(db) -> User:
    return User.objects.create_user(username="mod-review", is_staff=True)


def events(item: ProcessedItem, event_type: str) -> int:
    return OutboxEvent.objects.filter(subject=str(item.pk), event_type=event_type).count()


def review_history(item: ProcessedItem) -> list[tuple[str, str, str]]:
    rows = ModerationDecision.objects.filter(item=item, stage=DecisionStage.REVIEW).order_by("created_at", "pk")
    return list(rows.values_list("actor", "verdict", "category"))


def report(item: ProcessedItem, *readers: Agent) -> None:
    """Each reader scores the item -1, as the cg:item:stats consumer applies it (in its transaction)."""
    for n, reader in enumerate(readers):
        with transaction.atomic():
            item_feedback_count(item_id=item.pk, reader_id=reader.pk, score=-1, event_id=f"e-{reader.pk}-{n}")


def readers(count: int, *, age_days: float = 30) -> list[Agent]:
    agents = [make_agent()[0] for _ in range(count)]
    Agent.objects.filter(pk__in=[a.pk for a in agents]).update(created_at=timezone.now() - timedelta(days=age_days))
    return agents


# --- approve / reject ------------------------------------------------------------------------------------


def test_approve_publishes_a_held_item_with_its_search_vector_decision_and_event(moderator):
    item = make_held_item(content="Offering Kubernetes consulting in Berlin")
    assert item.search_vector is None

    done = item_review_approve(item=item, moderator=moderator, note="fine")

    assert done.status == ItemStatus.COMPLETED
    assert done.search_vector is not None
    assert review_history(item)[-1] == ("mod-review", "approved", "published")
    assert ModerationDecision.objects.get(item=item, verdict="approved").moderator == moderator
    assert events(item, ITEM_COMPLETED) == 1
    with pytest.raises(ActionRefused, match="only review"):
        item_review_approve(item=item, moderator=moderator)  # a second approve finds nothing held
    assert events(item, ITEM_COMPLETED) == 1


def test_reject_discards_a_held_item_with_the_moderators_reason(moderator):
    item = make_held_item()
    with pytest.raises(ActionRefused, match="needs a reason"):
        item_review_reject(item=item, moderator=moderator, reason="  ")

    done = item_review_reject(item=item, moderator=moderator, reason="a scam dressed as an offer")

    assert (done.status, done.reason) == (ItemStatus.DISCARDED, "content_evaluation")
    decision = ModerationDecision.objects.get(item=item, verdict="rejected")
    assert (decision.stage, decision.reason, decision.moderator) == ("review", "a scam dressed as an offer", moderator)
    assert events(item, ITEM_DISCARDED) == 1
    with pytest.raises(ActionRefused):
        item_review_reject(item=item, moderator=moderator, reason="again")


def test_approve_and_reject_refuse_items_that_are_not_held(moderator):
    completed = make_completed_item()
    with pytest.raises(ActionRefused, match="it is completed"):
        item_review_approve(item=completed, moderator=moderator)
    with pytest.raises(ActionRefused, match="it is completed"):
        item_review_reject(item=completed, moderator=moderator, reason="x")
    assert ProcessedItem.objects.get(pk=completed.pk).status == ItemStatus.COMPLETED


def test_an_authors_copy_of_their_held_item_is_its_duplicate_so_approving_cannot_publish_the_text_twice():
    held = make_held_item(content="Selling a lightly used RTX 4090, 1200 EUR, pickup in Lyon.")
    copy = make_item(author=held.author, content="Selling a lightly used RTX 4090, 1200 EUR, pickup in Lyon.")
    assert exact_duplicate_of(ProcessedItem.objects.select_related("raw").get(pk=copy.pk)) == held.raw
    claimed = item_claim_with_duplicate(item_id=copy.pk, token="1-1@test", lease_seconds=60)
    assert claimed[2] == held.raw


def test_another_authors_held_item_is_no_duplicate_so_a_copy_learns_nothing_of_it(moderator):
    """Issue 44, item 5: a copy discarded as `duplicate` of a hidden item told the copier that it exists."""
    text = "Selling a lightly used RTX 4090, 1200 EUR, pickup in Lyon."
    held = make_held_item(content=text)
    copy = make_item(content=text)  # another author
    assert exact_duplicate_of(ProcessedItem.objects.select_related("raw").get(pk=copy.pk)) is None
    claimed = item_claim_with_duplicate(item_id=copy.pk, token="1-1@test", lease_seconds=60)
    assert claimed[0] == Claim.CLAIMED and claimed[2] is None  # the enrichment's early gate finds none either
    # Published on its own merits, the copy keeps the held original from being published a second time.
    ProcessedItem.objects.filter(pk=copy.pk).update(status=ItemStatus.COMPLETED)
    with pytest.raises(ActionRefused, match=f"the same text is published as item {copy.pk}"):
        item_review_approve(item=held, moderator=moderator)
    assert ProcessedItem.objects.get(pk=held.pk).status == ItemStatus.REVIEW


def test_a_held_item_can_be_requeued_as_a_new_run(moderator):
    item = make_held_item(safety_risk=0.5)
    done = item_requeue(item=item, moderator=moderator)
    assert (done.status, done.run, done.safety_risk) == (ItemStatus.PENDING, 1, None)


# --- readers pull an item into the queue -----------------------------------------------------------------


def test_enough_reports_pull_a_completed_item_into_the_queue_once(settings, django_capture_on_commit_callbacks):
    settings.REVIEW_READER_PULL_WEIGHT = 3.0
    item = make_completed_item()
    first, second, third, fourth = readers(4)

    report(item, first, second)
    assert ProcessedItem.objects.get(pk=item.pk).status == ItemStatus.COMPLETED  # 2 < 3
    with django_capture_on_commit_callbacks() as callbacks:
        report(item, third)
    assert callbacks, "the feed cache is dropped when the pull commits"

    assert ProcessedItem.objects.get(pk=item.pk).status == ItemStatus.REVIEW
    assert review_history(item) == [("readers", "held", "reader_reports")]
    assert events(item, ITEM_HELD) == 1
    report(item, fourth)  # a further report: the item is held already
    assert review_history(item) == [("readers", "held", "reader_reports")]
    assert events(item, ITEM_HELD) == 1


def test_new_readers_weigh_half(settings):
    settings.REVIEW_READER_PULL_WEIGHT = 3.0
    settings.REVIEW_NEW_READER_DAYS = 7
    settings.REVIEW_NEW_READER_WEIGHT = 0.5
    item = make_completed_item()
    report(item, *readers(2, age_days=1), *readers(1))
    assert reported_weight(item_id=item.pk) == 2.0
    assert ProcessedItem.objects.get(pk=item.pk).status == ItemStatus.COMPLETED
    report(item, *readers(2, age_days=1))
    assert reported_weight(item_id=item.pk) == 3.0
    assert ProcessedItem.objects.get(pk=item.pk).status == ItemStatus.REVIEW


def test_reports_of_deactivated_readers_do_not_count(settings):
    settings.REVIEW_READER_PULL_WEIGHT = 2.0
    item = make_completed_item()
    stopped = readers(2)
    report(item, *stopped[:1])
    stopped[0].is_active = False
    stopped[0].save(update_fields=["is_active"])
    report(item, *stopped[1:])
    assert reported_weight(item_id=item.pk) == 1.0
    assert ProcessedItem.objects.get(pk=item.pk).status == ItemStatus.COMPLETED


def test_other_scores_do_not_count_and_an_approved_item_is_not_pulled_again(settings, moderator):
    settings.REVIEW_READER_PULL_WEIGHT = 2.0
    item = make_completed_item()
    fans = readers(3)
    for n, fan in enumerate(fans):
        with transaction.atomic():
            item_feedback_count(item_id=item.pk, reader_id=fan.pk, score=1, event_id=f"fan-{n}")
    assert ProcessedItem.objects.get(pk=item.pk).status == ItemStatus.COMPLETED

    report(item, *readers(2))
    item_review_approve(item=item, moderator=moderator)
    report(item, *readers(2))  # the same kind of reports again: a moderator already decided
    assert ProcessedItem.objects.get(pk=item.pk).status == ItemStatus.COMPLETED
    assert [verdict for _, verdict, _ in review_history(item)] == ["held", "approved"]


# --- what readers and the author see ----------------------------------------------------------------------


def test_a_held_item_is_on_no_read_surface_of_other_agents(
    settings,
    fake_llm,
    compat,  # noqa: F811 - the imported fixture
    django_capture_on_commit_callbacks,
):
    settings.REVIEW_READER_PULL_WEIGHT = 1.0
    author, _ = make_agent()
    _, reader_token = make_agent()
    content = "Offering Kubernetes consulting in Berlin"
    item = make_completed_item(author, content, embedding=unit(1.0), keywords=["kubernetes"])
    fake_llm.set_embedding("kubernetes", unit(1.0))
    reader = Client(HTTP_AUTHORIZATION=f"Bearer {reader_token}")

    def seen() -> dict[str, bool]:
        key = str(item.pk)
        return {
            "feed": key in [i["item_id"] for i in reader.get("/api/v1/feed").json()["items"]],
            "keyword": key
            in [i["item_id"] for i in reader.get("/api/v1/search?q=kubernetes&mode=keyword").json()["items"]],
            "semantic": key
            in [i["item_id"] for i in reader.get("/api/v1/search?q=kubernetes&mode=semantic").json()["items"]],
            "item": reader.get(f"/api/v1/items/{item.pk}").status_code == 200,
            "compat item": compat(reader_token).get(f"/items/{item.pk}")[0] == 200,
            "compat feed": key
            in [
                i["item_id"]
                for i in compat(reader_token).get("/items/feed?action=refresh&limit=10")[1]["data"]["items"]
            ],
        }

    assert all(seen().values()), seen()  # the item really is on every surface before it is held
    FeedDelivery.objects.filter(item=item).delete()  # the compat feed's memory: the next look is a fresh refresh
    with django_capture_on_commit_callbacks(execute=True):
        report(item, *readers(1))  # pulled by readers: it keeps its search vector and embedding
    assert ProcessedItem.objects.get(pk=item.pk).status == ItemStatus.REVIEW
    assert not any(seen().values()), seen()
    held_by_pipeline = make_held_item(author, "Selling Kubernetes training seats in Berlin", keywords=["kubernetes"])
    assert reader.get(f"/api/v1/items/{held_by_pipeline.pk}").status_code == 404


def test_the_author_sees_a_held_item_as_pending_review(compat):  # noqa: F811 - the imported fixture
    author, author_token = make_agent()
    item = make_held_item(author)
    own = Client(HTTP_AUTHORIZATION=f"Bearer {author_token}")
    assert own.get(f"/api/v1/items/{item.pk}").json()["status"] == "review"
    assert [i["status"] for i in own.get("/api/v1/items").json()["items"]] == ["review"]
    status, body, _ = compat(author_token).get(f"/items/{item.pk}")
    assert status == 200 and body["data"]["item"]["status"] == 1  # the client's "processing"
    _, mine, _ = compat(author_token).get("/agents/items")
    assert [i["status"] for i in mine["data"]["items"]] == [1]
