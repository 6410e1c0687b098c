"""Bounded growth: every retention of the maintenance job against real rows, the hourly roll-up of model calls
(nothing counted twice, the prompts page keeps its figures), and the job's self-scheduling."""

from __future__ import annotations

from datetime import timedelta

import django_rq
import pytest
from django.contrib.sessions.backends.db import SessionStore
from django.contrib.sessions.models import Session
from django.utils import timezone

from items.models import ItemStatus, OutboxEvent, ProcessedItem
from pipeline.health_snapshot import model_usage_24h
from pipeline.models import AuditEvent, ConsumedEvent, DeadLetter, DeadLetterState, LLMCall, LLMCallHourly
from pipeline.retention import (
    audit_events_prune,
    consumed_events_prune,
    dead_letters_prune,
    llm_calls_roll_up,
    outbox_prune,
)
from pipeline.scheduled_jobs import maintenance_job, maintenance_run
from tests.factories import make_item

pytestmark = pytest.mark.django_db


def ago(**delta):
    return timezone.now() - timedelta(**delta)


def test_dispatched_outbox_rows_go_after_the_retention_never_undispatched_ones(settings):
    settings.OUTBOX_RETENTION_HOURS = 1
    old_sent, old_unsent, recent_sent = make_item(), make_item(), make_item()
    OutboxEvent.objects.filter(subject=str(old_sent.pk)).update(dispatched_at=ago(hours=2))
    OutboxEvent.objects.filter(subject=str(old_unsent.pk)).update(created_at=ago(days=3))
    OutboxEvent.objects.filter(subject=str(recent_sent.pk)).update(dispatched_at=ago(minutes=30))

    assert outbox_prune() == 1
    left = set(OutboxEvent.objects.values_list("subject", flat=True))
    assert left == {str(old_unsent.pk), str(recent_sent.pk)}


def test_outbox_rows_the_sweeper_still_needs_are_kept_whatever_the_setting(settings):
    settings.OUTBOX_RETENTION_HOURS = 0.01  # 36 s, shorter than twice the sweeper's deadline (2 x 186 s)
    item = make_item()
    OutboxEvent.objects.filter(subject=str(item.pk)).update(dispatched_at=ago(minutes=5))
    assert outbox_prune() == 0
    OutboxEvent.objects.filter(subject=str(item.pk)).update(dispatched_at=ago(minutes=7))
    assert outbox_prune() == 1


def test_consumed_event_records_go_after_their_retention(settings):
    settings.CONSUMED_EVENT_RETENTION_HOURS = 24
    ConsumedEvent.objects.create(group="cg:a", event_id="old")
    ConsumedEvent.objects.create(group="cg:a", event_id="new")
    ConsumedEvent.objects.filter(event_id="old").update(consumed_at=ago(hours=25))
    assert consumed_events_prune() == 1
    assert list(ConsumedEvent.objects.values_list("event_id", flat=True)) == ["new"]


def _call(prompt: str, latency: float, outcome: str = "ok", hours_ago: float = 0, tokens: int = 10) -> LLMCall:
    call = LLMCall.objects.create(
        prompt=prompt, model="m", latency_ms=latency, input_tokens=tokens, output_tokens=2, outcome=outcome
    )
    LLMCall.objects.filter(pk=call.pk).update(created_at=ago(hours=hours_ago))
    return call


def test_model_calls_are_rolled_up_per_hour_before_they_go(settings):
    settings.LLM_CALL_RETENTION_HOURS = 2
    for latency in (100, 300):
        _call("safety", latency, hours_ago=3)
    _call("safety", 50, outcome="unavailable", hours_ago=3)
    _call("process_item", 700, outcome="invalid_output", hours_ago=5)
    keep = _call("safety", 10, hours_ago=1)
    usage_before = model_usage_24h()

    assert llm_calls_roll_up() == 4
    assert llm_calls_roll_up() == 0  # nothing left to move: nothing counted twice

    assert list(LLMCall.objects.values_list("pk", flat=True)) == [keep.pk]
    ok = LLMCallHourly.objects.get(prompt="safety", outcome="ok")
    assert (ok.calls, ok.latency_ms_sum, ok.latency_ms_max, ok.input_tokens, ok.output_tokens) == (2, 400, 300, 20, 4)
    assert LLMCallHourly.objects.get(prompt="safety", outcome="unavailable").calls == 1
    assert LLMCallHourly.objects.get(prompt="process_item").outcome == "invalid_output"
    assert model_usage_24h() == usage_before  # the prompts page's day of figures is unchanged

    _call("safety", 500, hours_ago=3)  # a late row of an hour already rolled up is added to it
    llm_calls_roll_up()
    ok.refresh_from_db()
    assert (ok.calls, ok.latency_ms_max) == (3, 500)


def test_audit_rows_are_kept_by_default_and_pruned_when_configured(settings):
    AuditEvent.objects.create(event_id="e1", stream="s", message_id="1-0", event_type="t", subject="1", envelope={})
    AuditEvent.objects.update(recorded_at=ago(days=400))
    assert audit_events_prune() == 0
    settings.AUDIT_RETENTION_DAYS = 365
    assert audit_events_prune() == 1


def _letter(n: int, state: str, *, subject: str = "", days_ago: float = 0) -> DeadLetter:
    letter = DeadLetter.objects.create(
        stream="stream:item:publish",
        group="cg:item:publish",
        message_id=f"{n}-0",
        subject=subject or str(n),
        error_class="transient",
        failed_at=timezone.now(),
        state=state,
    )
    DeadLetter.objects.filter(pk=letter.pk).update(updated_at=ago(days=days_ago))
    return letter


def test_closed_dead_letters_go_after_their_retention_open_ones_stay(settings):
    settings.DEAD_LETTER_RETENTION_DAYS = 30
    _letter(1, DeadLetterState.RESOLVED, days_ago=31)
    _letter(2, DeadLetterState.REQUEUED, days_ago=31)
    _letter(3, DeadLetterState.OPEN, days_ago=300)
    _letter(4, DeadLetterState.RESOLVED, days_ago=1)
    assert dead_letters_prune() == 2
    assert sorted(DeadLetter.objects.values_list("message_id", flat=True)) == ["3-0", "4-0"]


def test_maintenance_resolves_letters_of_items_that_finished_since_and_prunes_everything(redis_client):
    finished, failed, held = make_item(), make_item(), make_item()
    ProcessedItem.objects.filter(pk=finished.pk).update(status=ItemStatus.COMPLETED)
    ProcessedItem.objects.filter(pk=failed.pk).update(status=ItemStatus.FAILED)
    ProcessedItem.objects.filter(pk=held.pk).update(status=ItemStatus.REVIEW)  # the pipeline is done with it too
    _letter(1, DeadLetterState.OPEN, subject=str(finished.pk))
    _letter(2, DeadLetterState.OPEN, subject=str(failed.pk))
    _letter(3, DeadLetterState.OPEN, subject=str(held.pk))
    expired = SessionStore()
    expired.create()
    Session.objects.filter(session_key=expired.session_key).update(expire_date=ago(days=1))

    counts = maintenance_run()

    assert counts["dead_letters_superseded"] == 2 and counts["sessions"] == 1
    superseded = DeadLetter.objects.get(message_id="1-0")
    assert superseded.state == DeadLetterState.RESOLVED and "is completed" in superseded.note
    assert DeadLetter.objects.get(message_id="2-0").state == DeadLetterState.OPEN  # still needs a person
    assert "is review" in DeadLetter.objects.get(message_id="3-0").note
    assert set(counts) >= {"idempotency_keys", "outbox_events", "consumed_events", "llm_calls_rolled_up"}


def test_the_job_schedules_its_next_run_once_per_slot(redis_client, settings):
    settings.MAINTENANCE_INTERVAL_SECONDS = 600
    maintenance_job()
    maintenance_job()  # the same slot: one job, not two chains
    queue = django_rq.get_queue("default")
    scheduled = [job_id for job_id in queue.scheduled_job_registry.get_job_ids() if "maintenance" in job_id]
    assert len(scheduled) == 1
