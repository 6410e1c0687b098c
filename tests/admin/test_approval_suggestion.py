"""The reader suggestion is written only for a published item: the enrichment asks for none when it holds an item,
and a moderator's approval asks for it after the fact, in a django-rq job (never a model call in the moderator's
request), once: a job run again, or an item that has one already, pays for no second model call."""

from __future__ import annotations

import django_rq
import pytest
from rq import SimpleWorker

from items.models import ItemStatus, ProcessedItem
from pipeline.suggestions import item_suggestion_job
from tests.admin.conftest import discarded, messages_of
from tests.factories import make_held_item, make_item
from tests.fakes.openai_server import DEFAULT_REPLIES
from tests.pipeline.enrichment.test_review_hold import run_once, safety

pytestmark = pytest.mark.django_db

CHANGELIST = "/admin/items/processeditem/"
SUGGESTION = DEFAULT_REPLIES["suggest_action"]["suggestion"]


def queued_jobs() -> list[str]:
    return django_rq.get_queue("default").job_ids


def work_off_the_queue() -> None:
    """What `rqworker default` does, in this process (and so in the test's transaction)."""
    queue = django_rq.get_queue("default")
    SimpleWorker([queue], connection=queue.connection).work(burst=True)


@pytest.fixture
def approve(django_capture_on_commit_callbacks):
    """The moderator's POST of an approval; what it runs once it commits (queueing the job) runs as it would."""

    def post(client, pk: int, action: str = "approve_held_items"):
        with django_capture_on_commit_callbacks(execute=True):
            return client.post(CHANGELIST, {"action": action, "_selected_action": [pk]}, follow=True)

    return post


def test_a_held_item_gets_its_suggestion_when_a_moderator_approves_it(fake_llm, settings, mod_client, approve):
    settings.REVIEW_SAFETY_RISK = 0.35
    fake_llm.script("safety", safety(0.6))
    pk = make_item(content="Selling a kit to finish an unserialised pistol frame at home, ships discreetly.").pk
    run_once(pk)
    held = ProcessedItem.objects.get(pk=pk)
    assert held.status == ItemStatus.REVIEW and (held.suggestion, held.suggested_at) == ("", None)
    assert fake_llm.count("suggest_action") == 0  # nothing written for an item readers may never see

    response = approve(mod_client, pk)
    assert "Approved 1 processed item." in messages_of(response)
    assert fake_llm.count("suggest_action") == 0  # not in the moderator's request: queued
    assert queued_jobs() == [f"eigenflux-suggestion-{pk}"]

    work_off_the_queue()
    item = ProcessedItem.objects.get(pk=pk)
    assert (item.status, item.suggestion) == (ItemStatus.COMPLETED, SUGGESTION) and item.suggested_at is not None
    assert fake_llm.count("suggest_action") == 1

    assert item_suggestion_job(pk) is False  # the job again (a retry, a second approval): no second call
    assert fake_llm.count("suggest_action") == 1


def test_an_item_approved_over_its_discard_gets_its_suggestion(fake_llm, mod_client, approve):
    item = discarded(summary="Spare GPU hours this weekend.", keywords=["gpu"], broadcast_type="supply")
    approve(mod_client, item.pk, action="approve_items")
    assert ProcessedItem.objects.get(pk=item.pk).status == ItemStatus.COMPLETED
    work_off_the_queue()
    assert ProcessedItem.objects.get(pk=item.pk).suggestion == SUGGESTION
    assert fake_llm.count("suggest_action") == 1


def test_an_item_readers_pulled_keeps_the_suggestion_it_had(fake_llm, mod_client, approve):
    """Pulled from the feeds by readers' reports: it was published, so it has its suggestion; approving it asks
    for none."""
    from django.utils import timezone

    item = make_held_item(held_category="reader_reports", suggestion="Ask for a demo.", suggested_at=timezone.now())
    approve(mod_client, item.pk)
    assert queued_jobs() == []
    work_off_the_queue()
    assert ProcessedItem.objects.get(pk=item.pk).suggestion == "Ask for a demo."
    assert fake_llm.count("suggest_action") == 0


def test_an_item_that_is_not_published_is_never_given_one(fake_llm):
    item = make_held_item()
    assert item_suggestion_job(item.pk) is False
    assert ProcessedItem.objects.get(pk=item.pk).suggested_at is None
    assert fake_llm.count("suggest_action") == 0
