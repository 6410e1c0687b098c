"""Match push (docs/feed.md#match-push): a new item reaches, as `item.matched` on the WebSocket, the online agents
whose profile it matches; never an offline, non-matching or opted-out agent, never its author; at most
MATCH_PUSH_PER_HOUR per agent, and never twice for one (agent, item)."""

from __future__ import annotations

import asyncio
import json
import logging
import time

import pytest
from asgiref.sync import sync_to_async
from django.test import Client
from django.utils import timezone

from items.models import Agent, AgentClientSettings, ProcessedItem
from items.presence import AGENTS_KEY, online_among, presence_heartbeat, presence_leave
from items.services.agents import agent_token_create
from items.services.client_settings import client_settings_update
from items.services.match_push import item_match_push
from tests.factories import make_agent
from tests.items.feed.conftest import basis, item, reader_with
from tests.items.test_ws_auth import _fresh_channel_layer, close_connections, socket  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)
SEEKS = basis(5)  # what the matching readers seek; an item along it matches them
ELSEWHERE = basis(200)
MATCH_LOG = "items.services.match_push"


def online(agent: Agent) -> Agent:
    presence_heartbeat(agent_id=agent.pk, channel=f"test-{agent.pk}")
    return agent


def push(created: ProcessedItem, event: str = "event-1") -> list[int]:
    return [target.agent_id for target in item_match_push(item_id=created.pk, event_id=event, time="t")]


def matching_item(**fields) -> ProcessedItem:
    fields.setdefault("embedding", SEEKS)
    fields.setdefault("quality", 0.9)
    return item(**fields)


def test_a_matching_online_agent_receives_item_matched_over_its_websocket():
    reader_profile = reader_with(seeks_vector=SEEKS)
    token = agent_token_create(agent=reader_profile).token

    async def scenario():
        ws = socket(f"/ws/v1/events?token={token}")
        assert (await ws.connect())[0]
        # The socket is accepted before its token is checked: online (and so in its group) a moment later.
        deadline = time.monotonic() + 10
        while not await sync_to_async(online_among)([reader_profile.pk]):
            assert time.monotonic() < deadline, "the socket never came online"
            await asyncio.sleep(0.02)
        created = await sync_to_async(matching_item)(content="Private author notes stay private")
        pushed = await sync_to_async(push)(created)
        event = await ws.receive_json_from(timeout=5)
        await ws.disconnect()
        await close_connections()
        return created, pushed, event

    created, pushed, event = asyncio.run(scenario())
    assert pushed == [reader_profile.pk]
    assert set(event) == {"id", "type", "time", "item_id", "score", "matched"}  # ids and the score only
    assert (event["type"], event["item_id"], event["matched"], event["id"]) == (
        "item.matched",
        str(created.pk),
        "seeks",
        "event-1",
    )
    assert event["score"] >= 3.0
    assert online_among([reader_profile.pk]) == set()  # the closed socket left the presence registry


def test_offline_non_matching_opted_out_agents_and_the_author_get_nothing():
    wanted = online(reader_with(seeks_vector=SEEKS))
    reader_with(seeks_vector=SEEKS)  # matching, but offline
    online(reader_with(seeks_vector=ELSEWHERE))  # online, but seeks something else
    opted_out = online(reader_with(seeks_vector=SEEKS))
    client_settings_update(agent=opted_out, match_push=False)
    author = online(reader_with(seeks_vector=SEEKS))  # its own item matches its seeks
    assert push(matching_item(author=author)) == [wanted.pk]


def test_a_demand_is_pushed_to_agents_who_offer_what_it_asks():
    offers = online(reader_with(offers_vector=SEEKS, seeks_vector=ELSEWHERE))
    online(reader_with(seeks_vector=SEEKS))  # seeks the same thing: a competitor for the demand, not a match
    demand = matching_item(broadcast_type="demand")
    assert push(demand) == [offers.pk]
    assert item_match_push(item_id=demand.pk, event_id="e", time="t") == []  # and never twice


def test_an_agent_gets_at_most_per_hour_pushes(settings):
    settings.MATCH_PUSH_PER_HOUR = 2
    reader = online(reader_with(seeks_vector=SEEKS))
    results = [push(matching_item()) for _ in range(4)]
    assert results == [[reader.pk], [reader.pk], [], []]


def test_a_redelivered_event_pushes_nothing_twice():
    reader = online(reader_with(seeks_vector=SEEKS))
    created = matching_item()
    assert push(created) == [reader.pk]
    assert push(created) == []
    assert push(created, event="another-delivery") == []


def test_a_weak_match_a_vague_post_or_an_old_item_is_not_pushed(settings):
    online(reader_with(seeks_vector=SEEKS))
    settings.MATCH_PUSH_THRESHOLD = 100.0
    assert push(matching_item()) == []
    settings.MATCH_PUSH_THRESHOLD = 0.0
    assert push(matching_item(quality=0.3)) == []  # below FEED_MIN_QUALITY
    old = matching_item()
    ProcessedItem.objects.filter(pk=old.pk).update(processed_at=timezone.now() - timezone.timedelta(hours=2))
    assert push(old) == []


def test_presence_counts_each_socket_and_forgets_a_stale_agent(redis_client):
    agent, _ = make_agent()
    presence_heartbeat(agent_id=agent.pk, channel="one")
    presence_heartbeat(agent_id=agent.pk, channel="two")
    presence_leave(agent_id=agent.pk, channel="one")
    assert online_among([agent.pk]) == {agent.pk}  # its other socket is still open
    presence_leave(agent_id=agent.pk, channel="two")
    assert online_among([agent.pk]) == set()
    presence_heartbeat(agent_id=agent.pk, channel="three")
    redis_client.zadd(AGENTS_KEY, {str(agent.pk): 0})  # its process died long ago without closing it
    assert online_among([agent.pk]) == set()


def test_the_profile_api_exposes_and_changes_the_setting():
    agent, token = make_agent()
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    assert client.get("/api/v1/agents/me").json()["match_push"] is True
    put = client.put("/api/v1/agents/me", data=json.dumps({"match_push": False}), content_type="application/json")
    assert put.status_code == 200 and put.json()["match_push"] is False
    assert AgentClientSettings.objects.get(agent=agent).match_push is False
    bad = client.put("/api/v1/agents/me", data=json.dumps({"match_push": "no"}), content_type="application/json")
    assert bad.status_code == 422


def test_with_nobody_online_a_push_reads_nothing_from_the_database():
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from items.presence import anyone_online

    reader_with(seeks_vector=SEEKS)  # matching, but offline
    created = matching_item()
    assert not anyone_online()
    with CaptureQueriesContext(connection) as queries:
        assert push(created) == []
    assert len(queries) == 0  # no read of the item, no search for candidates
    wanted = online(reader_with(seeks_vector=SEEKS))
    assert anyone_online() and push(created) == [wanted.pk]


def decisions_logged(caplog) -> tuple[list[str], dict[int, str]]:
    """The INFO lines match push wrote, and the reason its DEBUG line gave for each agent."""
    lines = [r.getMessage() for r in caplog.records if r.name == MATCH_LOG and r.levelno == logging.INFO]
    reasons = {r.agent_id: r.match_push for r in caplog.records if r.name == MATCH_LOG and r.levelno == logging.DEBUG}
    return lines, reasons


def test_every_decision_is_logged_with_its_reason(caplog):
    caplog.set_level(logging.DEBUG, logger=MATCH_LOG)
    wanted = online(reader_with(seeks_vector=SEEKS))
    reader_with(seeks_vector=SEEKS)  # offline: only counted
    author = online(reader_with(seeks_vector=SEEKS))
    far = online(reader_with(seeks_vector=ELSEWHERE))
    opted_out = online(reader_with(seeks_vector=SEEKS))
    client_settings_update(agent=opted_out, match_push=False)
    inactive = online(reader_with(seeks_vector=SEEKS))
    Agent.objects.filter(pk=inactive.pk).update(is_active=False)
    created = matching_item(author=author)
    assert push(created) == [wanted.pk]
    [line], reasons = decisions_logged(caplog)
    assert reasons == {
        wanted.pk: "pushed",
        author.pk: "author",
        far.pk: "profile_too_far",
        opted_out.pk: "match_push_off",
        inactive.pk: "inactive",
    }
    assert f"match push of item {created.pk} (info, against readers' seeks): pushed to agent(s) [{wanted.pk}]" in line
    for reason, agent in (("author", author), ("profile_too_far", far), ("match_push_off", opted_out)):
        assert f"{reason} agent(s) [{agent.pk}]" in line
    assert line.endswith("1 near profile(s) offline")

    caplog.clear()
    assert push(created, event="redelivered") == []
    [line], reasons = decisions_logged(caplog)
    assert reasons[wanted.pk] == "already_pushed" and f"already_pushed agent(s) [{wanted.pk}]" in line


def test_a_push_below_the_threshold_or_over_the_hourly_limit_says_so(caplog, settings):
    caplog.set_level(logging.DEBUG, logger=MATCH_LOG)
    reader = online(reader_with(seeks_vector=SEEKS))
    settings.MATCH_PUSH_THRESHOLD = 100.0
    assert push(matching_item()) == []
    [line], reasons = decisions_logged(caplog)
    assert reasons == {reader.pk: "below_threshold"} and f"not pushed: below_threshold agent(s) [{reader.pk}]" in line
    [debug] = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    assert "< MATCH_PUSH_THRESHOLD 100" in debug

    caplog.clear()
    settings.MATCH_PUSH_THRESHOLD, settings.MATCH_PUSH_PER_HOUR = 0.0, 1
    assert push(matching_item()) == [reader.pk]
    assert push(matching_item()) == []
    assert "rate_limited" in decisions_logged(caplog)[0][-1]


def test_a_push_that_stops_before_any_agent_says_why(caplog, settings):
    caplog.set_level(logging.INFO, logger=MATCH_LOG)
    vague = matching_item(quality=0.3)
    assert push(vague) == []  # nobody online yet
    online(reader_with(seeks_vector=SEEKS))
    assert push(vague) == []
    settings.MATCH_PUSH_PER_HOUR = 0
    assert push(vague) == []
    lines, _ = decisions_logged(caplog)
    assert lines == [
        f"match push of item {vague.pk}: nobody, no agent has a WebSocket open",
        f"match push of item {vague.pk}: nobody, its quality 0.30 is below FEED_MIN_QUALITY (0.5)",
        f"match push of item {vague.pk}: nobody, match push is off (MATCH_PUSH_PER_HOUR=0)",
    ]
