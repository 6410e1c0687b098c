"""End to end: an item whose publish event was dead-lettered is completed after a moderator requeues the
letter — the archive copies the runtime's dead-letter entry, the requeue goes through the outbox with replay
set, and a real `run_pipeline --burst` (relay + cg:item:publish, fake model server) finishes the item."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from django.utils import timezone

from items.events import ITEM_COMPLETED, ITEM_PUBLISHED, STREAM_ITEM_PUBLISH
from items.models import ItemStatus, OutboxEvent, ProcessedItem
from pipeline.consumers.dead_letter_archive import DlqArchiver
from pipeline.dead_letter_table import dead_letter_requeue
from pipeline.models import DeadLetter, DeadLetterState
from pipeline.runtime.dead_lettering import dead_letter
from tests.factories import make_item
from tests.fakes.openai_server import DEFAULT_REPLIES
from tests.pipeline.enrichment.conftest import enrich  # noqa: F401 - fixture
from tests.pipeline.runtime.fixtures import pipeline_env, run_pipeline  # noqa: F401 - fixtures

GROUP = "cg:item:publish"


@pytest.mark.slow
def test_requeued_dead_letter_completes_the_item(enrich, redis_client):  # noqa: F811 - the imported fixture
    raw = make_item()
    original = OutboxEvent.objects.get(subject=str(raw.pk), event_type=ITEM_PUBLISHED)
    # The relay delivered the publish event; enrichment failed on every delivery and the runtime dead-lettered it.
    redis_client.xgroup_create(STREAM_ITEM_PUBLISH, GROUP, id="0", mkstream=True)
    message_id = redis_client.xadd(STREAM_ITEM_PUBLISH, original.envelope)
    OutboxEvent.objects.filter(pk=original.pk).update(dispatched_at=timezone.now(), stream_message_id=message_id)
    redis_client.xreadgroup(GROUP, "crashed-worker", {STREAM_ITEM_PUBLISH: ">"})
    assert dead_letter(
        redis_client,
        stream=STREAM_ITEM_PUBLISH,
        group=GROUP,
        consumer="crashed-worker",
        message_id=message_id,
        fields=original.envelope,
        delivery_count=4,
        error_class="transient",
        error="RetryLater: model unavailable",
    )
    ProcessedItem.objects.filter(pk=raw.pk).update(status=ItemStatus.FAILED, last_error="model unavailable")

    DlqArchiver(client=redis_client).drain()
    letter = DeadLetter.objects.get(subject=str(raw.pk))
    moderator = User.objects.create_user("mod-e2e", is_staff=True)
    dead_letter_requeue(letter=letter, actor=moderator)

    enrich()

    item = ProcessedItem.objects.get(pk=raw.pk)
    assert item.status == ItemStatus.COMPLETED
    assert DeadLetter.objects.get(pk=letter.pk).state == DeadLetterState.REQUEUED
    replayed = OutboxEvent.objects.filter(subject=str(raw.pk), event_type=ITEM_PUBLISHED).exclude(pk=original.pk).get()
    assert replayed.envelope["replay"] == "1" and replayed.dispatched_at is not None
    completed = OutboxEvent.objects.get(subject=str(raw.pk), event_type=ITEM_COMPLETED)
    assert completed.envelope["causationid"] == str(replayed.event_id)
    assert json.loads(completed.envelope["data"])["status"] == "completed"


@pytest.mark.slow
def test_a_requeued_failed_item_pays_for_no_embedding_again(enrich, fake_llm, client):  # noqa: F811
    raw = make_item(content="Looking for a Django reviewer for a small open-source pipeline, two hours a week.")
    fake_llm.set_default("process_item", "No JSON here, sorry.")  # every extraction is invalid: retries run out
    enrich()
    item = ProcessedItem.objects.get(pk=raw.pk)
    # The embedding checkpoint is kept, outside the HNSW graphs (no index entry for an item no reader sees).
    assert item.status == ItemStatus.FAILED and item.pending_embedding is not None and item.embedding is None
    assert (fake_llm.count("embed"), fake_llm.count("process_item")) == (1, 3)

    # Through the admin's item action (a superuser: the flushed test database has no `moderators` group).
    client.force_login(User.objects.create_superuser("admin-e2e"))
    response = client.post(
        reverse("admin:items_processeditem_changelist"),
        {"action": "requeue_items", "_selected_action": [str(raw.pk)]},
        follow=True,
    )
    assert "Requeued 1 processed item." in [str(m) for m in response.context["messages"]]
    fake_llm.set_default("process_item", DEFAULT_REPLIES["process_item"])
    enrich()

    item.refresh_from_db()
    assert item.status == ItemStatus.COMPLETED
    assert item.embedding is not None and item.pending_embedding is None  # moved into the indexed column
    assert fake_llm.count("embed") == 1  # the stored embedding was reused: no new embedding request
    assert (fake_llm.count("safety"), fake_llm.count("process_item")) == (2, 4)  # the judgements asked again
    run_1 = item.decisions.filter(run=1, actor="pipeline", verdict="pass").values_list("stage", flat=True)
    assert sorted(run_1) == ["blacklist", "duplicate", "extraction", "quality", "safety"]
