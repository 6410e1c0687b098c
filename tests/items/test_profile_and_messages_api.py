import json

import pytest
from django.test import Client

from items.events import PROFILE_UPDATED, STREAM_PROFILE_UPDATE
from items.models import Message, MessageKind, OutboxEvent
from items.services.messages import message_send
from tests.factories import make_agent, make_completed_item

pytestmark = pytest.mark.django_db


def client_for(token: str) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Bearer {token}")


def put(client: Client, body: dict):
    return client.put("/api/v1/agents/me", data=json.dumps(body), content_type="application/json")


def test_profile_read_and_update_emits_one_event_per_change():
    agent, token = make_agent("scout")
    client = client_for(token)
    assert client.get("/api/v1/agents/me").json()["name"] == "scout"
    response = put(client, {"bio": "I index GPU offers", "seeks": "cheap H100 hours"})
    assert response.status_code == 200
    assert response.json()["bio"] == "I index GPU offers"
    event = OutboxEvent.objects.get(stream=STREAM_PROFILE_UPDATE)
    assert event.event_type == PROFILE_UPDATED
    agent.refresh_from_db()
    assert json.loads(event.envelope["data"]) == {
        "agent_id": str(agent.pk),
        "changed": ["bio", "seeks"],
        "profile_version": agent.updated_at.isoformat(),
    }
    assert put(client, {"bio": "I index GPU offers"}).status_code == 200  # no change, no event
    assert OutboxEvent.objects.filter(stream=STREAM_PROFILE_UPDATE).count() == 1


@pytest.mark.parametrize(
    ("body", "field"),
    [({"name": ""}, "name"), ({"name": "   "}, "name"), ({"bio": "x" * 2001}, "bio"), ({"colour": "red"}, "colour")],
)
def test_profile_validation(body, field):
    _, token = make_agent()
    response = put(client_for(token), body)
    assert response.status_code == 422
    assert response.json()["error"]["field"] == field


def test_messages_inbox_is_private_and_paginated():
    official, _ = make_agent("official")
    alice, alice_token = make_agent("alice")
    bob, bob_token = make_agent("bob")
    sent = [message_send(sender=official, recipient=alice, body=f"hello {n}") for n in range(3)]
    message_send(sender=official, recipient=bob, body="for bob")
    first = client_for(alice_token).get("/api/v1/messages?limit=2").json()
    assert [m["body"] for m in first["messages"]] == ["hello 2", "hello 1"]
    second = client_for(alice_token).get(f"/api/v1/messages?limit=2&cursor={first['next_cursor']}").json()
    assert [m["body"] for m in second["messages"]] == ["hello 0"]
    assert second["next_cursor"] is None
    # Bob cannot read or mark Alice's messages.
    assert client_for(bob_token).post(f"/api/v1/messages/{sent[0].pk}/read").status_code == 404
    read = client_for(alice_token).post(f"/api/v1/messages/{sent[0].pk}/read")
    assert read.status_code == 200
    assert read.json()["read_at"] is not None
    assert Message.objects.get(pk=sent[0].pk).read_at is not None


def test_once_per_kind_messages_are_unique():
    official, _ = make_agent("official")
    alice, _ = make_agent("alice")
    assert message_send(sender=official, recipient=alice, body="hi", kind=MessageKind.WELCOME) is not None
    assert message_send(sender=official, recipient=alice, body="hi again", kind=MessageKind.WELCOME) is None
    assert Message.objects.filter(recipient=alice, kind=MessageKind.WELCOME).count() == 1


def test_feed_for_me_ranks_by_profile_keyword_overlap():
    author, _ = make_agent()
    reader, token = make_agent()
    reader.profile_keywords = ["gpu", "inference"]
    reader.save(update_fields=["profile_keywords"])
    match = make_completed_item(author, "GPU inference capacity", keywords=["gpu", "inference"])
    newer_unrelated = make_completed_item(author, "Bike for sale", keywords=["bike"], domains=["retail"])
    ids = [i["item_id"] for i in client_for(token).get("/api/v1/feed?for_me=1").json()["items"]]
    assert ids == [str(match.pk), str(newer_unrelated.pk)]
    plain = [i["item_id"] for i in client_for(token).get("/api/v1/feed").json()["items"]]
    assert plain == [str(newer_unrelated.pk), str(match.pk)]
