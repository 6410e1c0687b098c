"""Author milestones, handled in-process by the cg:item:stats and cg:item:notify consumers: exactly one
milestone, inbox message and push per (item, kind, threshold) even when events are redelivered; the
WebSocket receives it; the EigenFlux client sees it once among its notifications; the admin edits the rules."""

from __future__ import annotations

import asyncio

import pytest
from channels.db import database_sync_to_async
from channels.layers import channel_layers
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.db import connections
from django.test import Client
from django.urls import reverse

from items.events import ITEM_MILESTONE, STREAM_ITEM_EVENTS, STREAM_ITEM_STATS
from items.events_socket import agent_group
from items.models import ItemMilestone, Message, MessageKind, MilestoneRule, OutboxEvent
from items.services.feedback import item_feedback_submit
from items.services.milestones import template_problem
from items.services.unseen_feed import feed_refresh
from pipeline.consumers.item_notify import ItemNotifyConsumer
from pipeline.consumers.item_stats import ItemStatsConsumer
from pipeline.runtime import NothingToDo
from tests.factories import make_agent, make_completed_item, outbox_stream_event
from tests.items.compat.conftest import CompatClient


def stats_events(after: int = 0) -> list[OutboxEvent]:
    return list(OutboxEvent.objects.filter(stream=STREAM_ITEM_STATS, pk__gt=after).order_by("pk"))


def count_all(after: int = 0) -> int:
    """Hand the stats events after outbox row `after` to cg:item:stats; returns the last row's id."""
    last = after
    for row in stats_events(after):
        ItemStatsConsumer().handle(outbox_stream_event(row, group=ItemStatsConsumer.group))
        last = row.pk
    return last


def milestone_events() -> list[OutboxEvent]:
    return list(OutboxEvent.objects.filter(stream=STREAM_ITEM_EVENTS, event_type=ITEM_MILESTONE).order_by("pk"))


@pytest.fixture
def rules():
    """Small thresholds: consumed 2 and 3, a first +2."""
    MilestoneRule.objects.all().delete()
    template = "“{summary}” reached {threshold} ({count})."
    for kind, threshold in (("consumed", 2), ("consumed", 3), ("score_two", 1)):
        MilestoneRule.objects.create(kind=kind, threshold=threshold, message_template=template)


def deliver(item, readers) -> None:
    for reader in readers:
        assert item.pk in [i.pk for i in feed_refresh(reader=reader, limit=5).items]


def test_the_default_rules_are_seeded(db):
    found = set(MilestoneRule.objects.values_list("kind", "threshold"))
    assert {("consumed", 10), ("consumed", 100), ("consumed", 1000), ("score_two", 1)} <= found


def test_each_consumption_milestone_is_reached_once_even_when_redelivered(db, rules):
    author, _ = make_agent()
    item = make_completed_item(author, "Spare GPU hours this weekend.", summary="Spare GPU hours")
    deliver(item, [make_agent()[0] for _ in range(4)])
    count_all()
    reached = list(ItemMilestone.objects.order_by("threshold").values_list("item_id", "kind", "threshold"))
    assert reached == [(item.pk, "consumed", 2), (item.pk, "consumed", 3)]
    messages = list(Message.objects.filter(recipient=author, kind=MessageKind.MILESTONE).order_by("pk"))
    assert [m.body for m in messages] == ["“Spare GPU hours” reached 2 (2).", "“Spare GPU hours” reached 3 (3)."]
    assert [e.envelope["subject"] for e in milestone_events()] == [str(item.pk)] * 2
    for row in stats_events():  # every event again: each is recognised, nothing is sent twice
        with pytest.raises(NothingToDo):
            ItemStatsConsumer().handle(outbox_stream_event(row, group=ItemStatsConsumer.group, delivery_count=2))
    assert ItemMilestone.objects.count() == 2 and len(milestone_events()) == 2
    assert Message.objects.filter(kind=MessageKind.MILESTONE).count() == 2


def test_the_first_plus_two_is_a_milestone_once(db, rules):
    author, _ = make_agent()
    item = make_completed_item(author)
    (first, _), (second, _) = make_agent(), make_agent()
    item_feedback_submit(reader=first, item=item, score=2)
    item_feedback_submit(reader=first, item=item, score=1)  # changes its mind: +2 count back to 0
    item_feedback_submit(reader=second, item=item, score=2)  # a +2 again, but not the first
    count_all()
    assert list(ItemMilestone.objects.values_list("kind", "threshold")) == [("score_two", 1)]


def test_a_disabled_rule_and_the_official_agents_items_reach_nothing(db, rules):
    from pipeline.official import official_agent

    MilestoneRule.objects.filter(kind="consumed").update(enabled=False)
    item = make_completed_item(make_agent()[0])
    official_item = make_completed_item(official_agent())
    reader, _ = make_agent()
    item_feedback_submit(reader=reader, item=item, score=1)
    item_feedback_submit(reader=reader, item=official_item, score=2)
    deliver(item, [make_agent()[0] for _ in range(3)])
    count_all()
    assert ItemMilestone.objects.count() == 0


def test_the_client_sees_a_milestone_once_among_its_notifications(db, rules):
    author, token = make_agent()
    item = make_completed_item(author, summary="Spare GPU hours")
    deliver(item, [make_agent()[0] for _ in range(2)])
    count_all()
    client = CompatClient(token)
    data = client.get("/items/feed?action=refresh&limit=5")[1]["data"]
    milestone = ItemMilestone.objects.get()
    assert [n for n in data["notifications"] if n["source_type"] == "milestone"] == [
        {
            "notification_id": str(milestone.message_id),
            "type": "consumed",
            "content": "“Spare GPU hours” reached 2 (2).",
            "created_at": data["notifications"][-1]["created_at"],
            "source_type": "milestone",
        }
    ]
    again = client.get("/items/feed?action=refresh&limit=5")[1]["data"]
    assert again["notifications"] == []


async def _joined(group: str, timeout: float = 30.0) -> None:
    """Until a socket is in the channel layer's `group` (channels_redis keeps a group as a sorted set)."""
    layer = channel_layers["default"]
    connection = layer.connection(layer.consistent_hash(group))
    deadline = asyncio.get_running_loop().time() + timeout
    while not await connection.zcard(layer._group_key(group)):
        assert asyncio.get_running_loop().time() < deadline, f"no socket joined {group}"
        await asyncio.sleep(0.02)


def test_the_websocket_receives_the_milestone(transactional_db, rules):
    from eigenflux.asgi import application

    channel_layers.backends.clear()  # this test's Redis database
    author, token = make_agent()
    item = make_completed_item(author, summary="Spare GPU hours")
    deliver(item, [make_agent()[0] for _ in range(2)])
    count_all()
    (row,) = milestone_events()
    event = outbox_stream_event(row, group=ItemNotifyConsumer.group)

    async def scenario():
        socket = WebsocketCommunicator(application, f"/ws/v1/events?token={token}")
        connected, _ = await socket.connect()
        assert connected
        # The socket is accepted before it authenticates and joins its agent's group: a push sent before it joined
        # would reach nobody, as for any client that connects a moment later.
        await _joined(agent_group(author.pk))
        # The consumer's handler, synchronous as the runtime runs it, in a worker thread of this event loop.
        await database_sync_to_async(ItemNotifyConsumer().handle)(event)
        received = await socket.receive_json_from(timeout=30)
        await socket.disconnect()
        await database_sync_to_async(connections.close_all)()
        return received

    received = asyncio.run(scenario())
    assert received["type"] == ITEM_MILESTONE
    assert received["item_id"] == str(item.pk)
    assert received["milestone"] == {"kind": "consumed", "threshold": 2, "count": 2}
    assert received["message"] == "“Spare GPU hours” reached 2 (2)."
    assert received["id"] == row.envelope["id"]


@pytest.mark.parametrize(
    ("template", "problem"),
    [
        ("Reached {threshold}!", None),
        ("{{literal}} {summary}", None),
        ("{summary.__class__}", "unknown placeholder"),
        ("{bogus}", "unknown placeholder"),
        ("{count!r}", "unknown placeholder"),
        ("{summary", "malformed template"),
        ("  ", "must not be blank"),
    ],
)
def test_templates_use_only_the_known_placeholders(template, problem):
    found = template_problem(template)
    assert (found is None) if problem is None else (problem in found)


def test_a_moderator_edits_a_threshold_in_the_admin_and_it_applies(db, rules):
    from django.contrib.auth.models import Group, Permission

    moderator = User.objects.create_user(username="mod-milestones", is_staff=True)
    moderator.groups.add(Group.objects.get(name="moderators"))
    # Writing the text is speaking as the official agent: a grant of its own (tests/admin/test_milestone_rules.py).
    moderator.user_permissions.add(Permission.objects.get(codename="write_official_text"))
    client = Client()
    client.force_login(moderator)
    rule = MilestoneRule.objects.get(kind="consumed", threshold=2)
    url = reverse("admin:items_milestonerule_change", args=[rule.pk])
    form = {"kind": "consumed", "threshold": "1", "message_template": "Delivered {count} times.", "enabled": "on"}
    assert client.post(url, {**form, "message_template": "{nope}"}).status_code == 200  # refused, form shown again
    assert MilestoneRule.objects.get(pk=rule.pk).threshold == 2
    assert client.post(url, form).status_code == 302
    assert MilestoneRule.objects.get(pk=rule.pk).threshold == 1
    assert client.get(reverse("admin:items_milestonerule_add")).status_code == 403  # adding is for superusers
    item = make_completed_item(make_agent()[0])
    deliver(item, [make_agent()[0]])
    count_all()
    assert list(ItemMilestone.objects.values_list("kind", "threshold")) == [("consumed", 1)]
    assert Message.objects.get(kind=MessageKind.MILESTONE).body == "Delivered 1 times."


def test_the_reached_milestones_are_listed_read_only(db, rules):
    admin = User.objects.create_superuser(username="root-milestones", password="x", email="root@example.com")
    client = Client()
    client.force_login(admin)
    item = make_completed_item(make_agent()[0])
    deliver(item, [make_agent()[0] for _ in range(2)])
    count_all()
    milestone = ItemMilestone.objects.get()
    page = client.get(reverse("admin:items_itemmilestone_changelist"))
    assert page.status_code == 200 and str(item.pk) in page.content.decode()
    assert client.get(reverse("admin:items_itemmilestone_add")).status_code == 403
    assert (
        client.post(reverse("admin:items_itemmilestone_delete", args=[milestone.pk]), {"post": "yes"}).status_code
        == 403
    )
    assert client.get(reverse("admin:items_milestonerule_add")).status_code == 200  # a superuser adds rules
