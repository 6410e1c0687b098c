"""Events go only where they are wanted (docs/stream-runtime.md, "Event types"): each stream has one registry of
the event types it carries (items.events.STREAM_EVENT_TYPES); every group on a stream has decided, for each of
them, whether it handles it or leaves it to the others; what a group leaves is acknowledged, never dead-lettered."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps as django_apps
from django.db import transaction
from django.utils import timezone

from items import events
from items.events import STREAM_EVENT_TYPES, STREAM_ITEM_EVENTS, UnregisteredEventType
from items.models import ItemFeedback, ItemStatus, ProcessedItem
from items.outbox import outbox_event_create
from items.services.feedback import item_pull_when_reported
from items.services.retract import item_delete
from pipeline.consumers import load_consumers
from pipeline.models import AuditEvent, DeadLetter, DeadLetterState
from pipeline.retention import retention_run
from pipeline.streams import KNOWN_STREAMS, dlq_stream
from tests.factories import make_agent, make_item
from tests.pipeline.runtime.fixtures import pipeline_env, run_pipeline  # noqa: F401 - fixtures


def _consumers_by_stream() -> dict[str, list]:
    by_stream: dict[str, list] = {}
    for consumer in load_consumers().values():
        by_stream.setdefault(consumer.stream, []).append(consumer)
    return by_stream


def _decisions() -> list[tuple[str, str, str]]:
    return [
        (stream, event_type, consumer.name)
        for stream, types in sorted(STREAM_EVENT_TYPES.items())
        for consumer in _consumers_by_stream().get(stream, [])
        for event_type in sorted(types)
    ]


def test_every_event_type_the_application_names_is_carried_by_a_stream():
    named = {value for name, value in vars(events).items() if name.isupper() and str(value).startswith("io.")}
    carried = set().union(*STREAM_EVENT_TYPES.values())
    assert named - carried == set(), "add the new type to items.events.STREAM_EVENT_TYPES"
    assert set(KNOWN_STREAMS) == set(STREAM_EVENT_TYPES)


@pytest.mark.parametrize(("stream", "event_type", "consumer"), _decisions())
def test_every_group_has_decided_on_every_type_its_stream_carries(stream, event_type, consumer):
    declared = load_consumers()[consumer]
    assert event_type in declared.event_types | declared.ignores, (
        f"{declared.group} on {stream} neither handles nor ignores {event_type}: add it to `event_types` or `ignores`"
    )


def test_a_group_handles_only_types_its_stream_carries():
    for stream, consumers in _consumers_by_stream().items():
        if stream not in STREAM_EVENT_TYPES:
            continue  # the dead-letter archiver reads records of its own, not events
        for consumer in consumers:
            assert consumer.event_types | consumer.ignores <= STREAM_EVENT_TYPES[stream], consumer.name


@pytest.mark.django_db
def test_the_outbox_refuses_a_type_its_stream_does_not_carry():
    with transaction.atomic(), pytest.raises(UnregisteredEventType, match="not registered for stream"):
        outbox_event_create(stream=STREAM_ITEM_EVENTS, event_type="io.eigenflux.item.surprise.v1", subject="1", data={})


def _false_letter(n: int, event_type: str, error: str) -> DeadLetter:
    return DeadLetter.objects.create(
        stream=STREAM_ITEM_EVENTS,
        group="cg:item:match",
        message_id=f"{n}-0",
        event_type=event_type,
        subject=str(n),
        error_class="permanent",
        error=error,
        failed_at=timezone.now(),
    )


@pytest.mark.django_db
def test_the_false_dead_letters_of_earlier_versions_are_resolved_with_a_reason_and_real_ones_stay_open():
    false = _false_letter(1, events.ITEM_DISCARDED, f"malformed: unknown type '{events.ITEM_DISCARDED}' for group x")
    unknown = _false_letter(2, "io.other.v1", "malformed: unknown type 'io.other.v1' for group cg:item:match")
    real = _false_letter(3, events.ITEM_COMPLETED, "malformed: bad JSON in data: JSONDecodeError")
    migration = importlib.import_module("pipeline.migrations.0006_resolve_false_dead_letters")
    migration.resolve_not_handled(django_apps, None)  # what `migrate` runs, with the live models
    false.refresh_from_db()
    assert false.state == DeadLetterState.RESOLVED
    assert "cg:item:match does not handle io.eigenflux.item.discarded.v1" in false.note
    assert DeadLetter.objects.get(pk=unknown.pk).state == DeadLetterState.OPEN
    assert DeadLetter.objects.get(pk=real.pk).state == DeadLetterState.OPEN
    assert retention_run()["dead_letters_not_handled"] == 0  # the retention job runs it too, now with nothing left


NORMAL = "Renting out a quiet desk in a Kreuzberg co-working space, 180 euros a month, fibre internet included."
UNSAFE = "Step-by-step guide to building a pipe bomb at home from hardware store parts, untraceable."
LATER = "Free Saturday workshop on home composting at the Wedding community garden, bring a bucket."


@pytest.mark.slow
def test_a_mixed_day_of_outcomes_leaves_no_dead_letter(run_pipeline, settings):  # noqa: F811 - the fixture
    """Completed, discarded (unsafe, duplicate), held by readers and deleted items: every group on
    stream:item:events handles or acknowledges each outcome, nothing is dead-lettered."""
    env = {"LLM_PROVIDER": "local", "LLM_API_KEY": "", "OPENAI_API_KEY": ""}
    author, _ = make_agent()
    for text in (NORMAL, NORMAL, UNSAFE, LATER):
        make_item(author, text)
    first = run_pipeline("--burst", env=env)
    assert first.wait(180) == 0, first.output()[-4000:]
    statuses = sorted(ProcessedItem.objects.values_list("status", flat=True))
    assert statuses.count(ItemStatus.COMPLETED) == 2 and statuses.count(ItemStatus.DISCARDED) == 2, statuses
    completed = list(ProcessedItem.objects.filter(status=ItemStatus.COMPLETED).order_by("pk"))
    reader, _ = make_agent()
    settings.REVIEW_READER_PULL_WEIGHT = 0.1
    with transaction.atomic():
        ItemFeedback.objects.create(item_id=completed[0].pk, reader=reader, score=-1, event_id="report-1")
        assert item_pull_when_reported(item_id=completed[0].pk)
    assert item_delete(item=completed[1], actor=author)
    second = run_pipeline("--burst", env=env)
    assert second.wait(180) == 0, second.output()[-4000:]

    assert DeadLetter.objects.count() == 0, list(DeadLetter.objects.values_list("group", "error"))
    from eigenflux.base.redis import get_redis

    client = get_redis()
    assert client.xlen(dlq_stream(STREAM_ITEM_EVENTS)) == 0
    for group in client.xinfo_groups(STREAM_ITEM_EVENTS):
        assert group["pending"] == 0, group
    audited = set(AuditEvent.objects.values_list("event_type", flat=True))
    assert {events.ITEM_COMPLETED, events.ITEM_DISCARDED, events.ITEM_HELD, events.ITEM_DELETED} <= audited
