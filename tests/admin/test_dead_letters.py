"""Dead letters: the cg:dlq:archive copy of real runtime dead-letter entries (idempotent), requeue through
the outbox with replay set (once), resolve with a note, and the bounded auto-requeue job."""

from __future__ import annotations

import contextlib
import json
from datetime import timedelta

import pytest
import redis
from django.urls import reverse
from django.utils import timezone
from rq.registry import ScheduledJobRegistry

from items.events import ITEM_PUBLISHED, STREAM_ITEM_EVENTS, STREAM_ITEM_PUBLISH, build_envelope
from items.models import OutboxEvent
from pipeline.consumers.dead_letter_archive import GROUP, DlqArchiver
from pipeline.dead_letter_table import (
    DeadLetterRefused,
    dead_letter_archive_fields,
    dead_letter_requeue,
    dead_letter_resolve,
    dead_letters_auto_requeue,
)
from pipeline.models import DeadLetter, DeadLetterState
from pipeline.runtime.dead_lettering import dead_letter
from pipeline.scheduled_jobs import AUTO_REQUEUE_JOB_PREFIX, dead_letters_auto_requeue_job, dead_letters_schedule
from pipeline.streams import DLQ_STREAMS, dlq_stream
from tests.admin.conftest import messages_of
from tests.factories import make_item

pytestmark = pytest.mark.django_db

CHANGELIST = reverse("admin:pipeline_deadletter_changelist")


def dead_lettered(
    client,
    *,
    stream=STREAM_ITEM_PUBLISH,
    group="cg:item:publish",
    data=None,
    error_class="transient",
    subject="42",
    event_type=ITEM_PUBLISHED,
):
    """Put an event on its stream, deliver it to a consumer and dead-letter it with the runtime's own script."""
    envelope = build_envelope(event_type=event_type, subject=subject, data=data or {"item_id": subject})
    with contextlib.suppress(redis.ResponseError):  # BUSYGROUP: the group exists
        client.xgroup_create(stream, group, id="0", mkstream=True)
    message_id = client.xadd(stream, envelope)
    client.xreadgroup(group, "consumer-1", {stream: ">"}, count=1000)
    result = dead_letter(
        client,
        stream=stream,
        group=group,
        consumer="consumer-1",
        message_id=message_id,
        fields=envelope,
        delivery_count=4,
        error_class=error_class,
        error="RetryLater: model unavailable",
    )
    assert result, "the runtime wrote no dead-letter entry"
    return message_id, envelope


def letter(**fields) -> DeadLetter:
    envelope = build_envelope(event_type=ITEM_PUBLISHED, subject="7", data={"item_id": "7", "author_id": "1"})
    defaults = {
        "stream": STREAM_ITEM_PUBLISH,
        "group": "cg:item:publish",
        "message_id": f"{DeadLetter.objects.count() + 1}-0",
        "event_id": envelope["id"],
        "subject": "7",
        "event_type": ITEM_PUBLISHED,
        "error_class": "transient",
        "error": "RetryLater: boom",
        "delivery_count": 4,
        "payload": envelope,
        "failed_at": timezone.now() - timedelta(hours=1),
    }
    return DeadLetter.objects.create(**{**defaults, **fields})


# --- archive ---------------------------------------------------------------------------------------------


def test_archive_copies_every_dlq_stream_once(redis_client):
    first, envelope = dead_lettered(redis_client)
    dead_lettered(redis_client, stream=STREAM_ITEM_EVENTS, group="cg:audit", subject="43", error_class="permanent")

    assert DlqArchiver(client=redis_client).drain() == 2
    assert DlqArchiver(client=redis_client).drain() == 0  # nothing new; the entries were ACKed

    row = DeadLetter.objects.get(stream=STREAM_ITEM_PUBLISH)
    assert (row.group, row.message_id, row.event_id, row.subject) == ("cg:item:publish", first, envelope["id"], "42")
    assert (row.error_class, row.delivery_count, row.state) == ("transient", 4, "open")
    assert row.error == "RetryLater: model unavailable"
    assert row.payload["data"] == envelope["data"]
    assert DeadLetter.objects.get(stream=STREAM_ITEM_EVENTS).error_class == "permanent"
    for stream in DLQ_STREAMS:
        assert redis_client.xpending(stream, GROUP)["pending"] == 0


def test_archive_is_idempotent_for_duplicate_entries(redis_client):
    dead_lettered(redis_client)
    [(_, fields)] = redis_client.xrange(dlq_stream(STREAM_ITEM_PUBLISH))
    redis_client.xadd(dlq_stream(STREAM_ITEM_PUBLISH), fields)  # the same letter delivered twice

    DlqArchiver(client=redis_client).drain()

    assert DeadLetter.objects.count() == 1
    assert dead_letter_archive_fields(fields).created is False
    assert DeadLetter.objects.count() == 1


def test_archive_takes_over_entries_a_crashed_archiver_left_pending(redis_client):
    dead_lettered(redis_client)
    crashed = DlqArchiver(client=redis_client)
    crashed.ensure_groups()
    redis_client.xreadgroup(GROUP, crashed.name, {dlq_stream(STREAM_ITEM_PUBLISH): ">"})  # read, never archived

    assert DlqArchiver(client=redis_client).reclaim(min_idle_ms=0) == 1
    assert DeadLetter.objects.count() == 1


def test_a_letter_from_a_requeued_event_inherits_the_auto_requeue_count(db):
    parent = letter(auto_requeues=2, state=DeadLetterState.REQUEUED)
    child_envelope = build_envelope(
        event_type=ITEM_PUBLISHED, subject="7", data={"item_id": "7"}, causation_id=parent.event_id
    )
    archived = dead_letter_archive_fields(
        {
            "stream": STREAM_ITEM_PUBLISH,
            "group": "cg:item:publish",
            "message_id": "99-0",
            "event_id": child_envelope["id"],
            "subject": "7",
            "event_type": ITEM_PUBLISHED,
            "delivery_count": "4",
            "error_class": "transient",
            "error": "again",
            "payload": json.dumps(child_envelope),
            "failed_at": "2026-01-01T00:00:00Z",
        }
    )
    assert archived.created and archived.letter.auto_requeues == 2


# --- requeue ---------------------------------------------------------------------------------------------


def test_requeue_sends_the_event_back_through_the_outbox_with_replay(mod_client, moderator, redis_client):
    _, envelope = dead_lettered(redis_client, data={"item_id": "42", "author_id": "9"})
    DlqArchiver(client=redis_client).drain()
    row = DeadLetter.objects.get()

    response = mod_client.post(CHANGELIST, {"action": "requeue_letters", "_selected_action": [row.pk]}, follow=True)

    assert "Requeued 1 dead letter." in messages_of(response)
    row.refresh_from_db()
    assert row.state == DeadLetterState.REQUEUED and row.resolved_by == moderator
    event = OutboxEvent.objects.get(event_type=ITEM_PUBLISHED, subject="42")
    assert event.stream == STREAM_ITEM_PUBLISH and event.dispatched_at is None
    assert event.envelope["replay"] == "1"
    assert json.loads(event.envelope["data"]) == {"item_id": "42", "author_id": "9"}
    assert event.envelope["causationid"] == envelope["id"]
    assert event.envelope["correlationid"] == envelope["correlationid"]
    assert str(event.event_id) != envelope["id"]


def test_a_second_requeue_of_the_same_letter_is_refused(mod_client):
    row = letter()
    mod_client.post(CHANGELIST, {"action": "requeue_letters", "_selected_action": [row.pk]})

    response = mod_client.post(CHANGELIST, {"action": "requeue_letters", "_selected_action": [row.pk]}, follow=True)

    text = " ".join(messages_of(response))
    assert "Requeued 0" in text and "1 refused" in text and "is requeued" in text
    assert OutboxEvent.objects.filter(subject="7").count() == 1


def test_bulk_requeue_reports_counts(mod_client):
    rows = [letter(), letter(), letter(state=DeadLetterState.RESOLVED)]
    response = mod_client.post(
        CHANGELIST, {"action": "requeue_letters", "_selected_action": [r.pk for r in rows]}, follow=True
    )
    text = " ".join(messages_of(response))
    assert "Requeued 2 dead letters." in text and "1 refused" in text


def test_a_truncated_or_malformed_letter_cannot_be_requeued(moderator):
    truncated = letter(payload={**letter().payload, "_truncated": "1"})
    not_an_event = letter(event_type="", payload={"garbage": "x"})
    for row in (truncated, not_an_event):
        with pytest.raises(DeadLetterRefused):
            dead_letter_requeue(letter=row, actor=moderator)
        row.refresh_from_db()
        assert row.state == DeadLetterState.OPEN


# --- resolve ---------------------------------------------------------------------------------------------


def test_resolve_asks_for_a_note_then_closes_the_letter(mod_client, moderator):
    row = letter()

    page = mod_client.post(CHANGELIST, {"action": "resolve_letters", "_selected_action": [row.pk]})
    assert page.status_code == 200 and b'name="note"' in page.content
    row.refresh_from_db()
    assert row.state == DeadLetterState.OPEN

    response = mod_client.post(
        CHANGELIST,
        {"action": "resolve_letters", "_selected_action": [row.pk], "confirm": "1", "note": "item deleted by author"},
        follow=True,
    )
    assert "Resolved 1 dead letter." in messages_of(response)
    row.refresh_from_db()
    assert (row.state, row.note, row.resolved_by) == (DeadLetterState.RESOLVED, "item deleted by author", moderator)


def test_resolving_a_closed_letter_is_refused(moderator):
    row = letter(state=DeadLetterState.REQUEUED)
    with pytest.raises(DeadLetterRefused, match="only open letters"):
        dead_letter_resolve(letter=row, actor=moderator, note="x")


def test_dead_letter_page_shows_payload_and_error(mod_client):
    row = letter(error="RetryLater: the safety model timed out")
    html = mod_client.get(reverse("admin:pipeline_deadletter_change", args=[row.pk])).content.decode()
    assert "the safety model timed out" in html
    assert "&quot;item_id&quot;: &quot;7&quot;" in html  # data pretty-printed (HTML-escaped)
    assert 'name="_save"' not in html


# --- auto-requeue ----------------------------------------------------------------------------------------


def test_auto_requeue_takes_old_transient_letters_only(settings):
    settings.DEAD_LETTER_AUTO_REQUEUE_MAX = 2
    settings.DEAD_LETTER_AUTO_REQUEUE_MIN_AGE_SECONDS = 60
    due = letter()
    permanent = letter(error_class="permanent")
    fresh = letter(failed_at=timezone.now())
    exhausted = letter(auto_requeues=2)

    assert dead_letters_auto_requeue() == 1

    states = {r.pk: (r.state, r.auto_requeues) for r in DeadLetter.objects.all()}
    assert states[due.pk] == ("requeued", 1)
    assert states[permanent.pk] == ("open", 0)
    assert states[fresh.pk] == ("open", 0)
    assert states[exhausted.pk] == ("open", 2)
    assert OutboxEvent.objects.get().envelope["replay"] == "1"


def test_auto_requeue_can_be_turned_off(settings):
    settings.DEAD_LETTER_AUTO_REQUEUE_MAX = 0
    letter()
    assert dead_letters_auto_requeue() == 0


@pytest.mark.django_db(transaction=True)  # the archive consumers run on threads with connections of their own
def test_the_job_archives_requeues_and_schedules_its_next_run(redis_client, settings):
    settings.DEAD_LETTER_AUTO_REQUEUE_MIN_AGE_SECONDS = 0
    make_item()  # an unrelated outbox row must not confuse the count
    dead_lettered(redis_client)

    assert dead_letters_auto_requeue_job() == 1

    assert DeadLetter.objects.get().state == DeadLetterState.REQUEUED
    import django_rq

    registry = ScheduledJobRegistry(queue=django_rq.get_queue("default"))
    [job_id] = registry.get_job_ids()
    assert job_id.startswith(AUTO_REQUEUE_JOB_PREFIX)


def test_scheduling_twice_makes_one_chain(redis_client):
    import django_rq

    dead_letters_schedule()
    dead_letters_schedule()
    registry = ScheduledJobRegistry(queue=django_rq.get_queue("default"))
    assert len(registry.get_job_ids()) == 1


def test_auto_requeue_skips_letters_whose_item_moved_on(settings):
    from items.models import ItemStatus, ProcessedItem

    settings.DEAD_LETTER_AUTO_REQUEUE_MIN_AGE_SECONDS = 60
    item = make_item()
    stale = letter(subject=str(item.pk))
    ProcessedItem.objects.filter(pk=item.pk).update(status=ItemStatus.PENDING)  # a moderator approved it
    assert dead_letters_auto_requeue() == 0
    assert DeadLetter.objects.get(pk=stale.pk).state == "open"
    ProcessedItem.objects.filter(pk=item.pk).update(status=ItemStatus.FAILED)
    assert dead_letters_auto_requeue() == 1
    assert OutboxEvent.objects.filter(envelope__targetgroup="cg:item:publish").count() == 1
