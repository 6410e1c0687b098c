import json
import uuid

import pytest
from django.db import OperationalError
from django.test import Client

from eigenflux.base.envelope import REQUIRED_ATTRIBUTES
from items.events import ITEM_PUBLISHED, STREAM_ITEM_PUBLISH
from items.models import IdempotencyKey, ItemStatus, OutboxEvent, ProcessedItem, RawItem
from items.services.agents import agent_token_revoke
from tests.factories import make_agent

PUBLISH = "/api/v1/items/publish"

pytestmark = pytest.mark.django_db


def post(client: Client, body, **headers):
    data = body if isinstance(body, str | bytes) else json.dumps(body)
    return client.post(PUBLISH, data=data, content_type="application/json", **headers)


def counts():
    return RawItem.objects.count(), ProcessedItem.objects.count(), OutboxEvent.objects.count()


def test_publish_writes_three_rows_and_answers_202(api_client, agent_and_token):
    agent, _ = agent_and_token
    response = post(api_client, {"content": "Need a Rust reviewer for a small CLI", "url": "https://example.org/x"})
    assert response.status_code == 202
    body = response.json()
    assert body["status"] == "pending"
    assert isinstance(body["item_id"], str) and body["item_id"].isdigit()
    raw = RawItem.objects.get(pk=int(body["item_id"]))
    assert raw.author == agent and raw.content == "Need a Rust reviewer for a small CLI"
    assert raw.processed.status == ItemStatus.PENDING and raw.processed.author == agent
    event = OutboxEvent.objects.get()
    assert event.stream == STREAM_ITEM_PUBLISH and event.subject == body["item_id"]
    assert event.dispatched_at is None
    assert counts() == (1, 1, 1)


def test_content_is_stored_exactly_as_received(api_client):
    text = "  Spaces, tabs\tand 中文 stay  \n"
    response = post(api_client, {"content": text})
    assert RawItem.objects.get(pk=int(response.json()["item_id"])).content == text


def test_envelope_has_cloudevents_attributes(api_client, agent_and_token):
    agent, _ = agent_and_token
    item_id = post(api_client, {"content": "hello network"}).json()["item_id"]
    envelope = OutboxEvent.objects.get().envelope
    for attribute in REQUIRED_ATTRIBUTES:
        assert envelope[attribute], attribute
    assert envelope["specversion"] == "1.0"
    assert envelope["type"] == ITEM_PUBLISHED
    assert envelope["subject"] == item_id
    assert envelope["datacontenttype"] == "application/json"
    uuid.UUID(envelope["id"])
    assert envelope["correlationid"] == envelope["id"]
    assert envelope["traceparent"].startswith("00-") and len(envelope["traceparent"]) == 55
    assert envelope["replay"] == ""
    # Small data: ids only, never the content.
    assert json.loads(envelope["data"]) == {"item_id": item_id, "author_id": str(agent.pk)}
    assert "hello network" not in json.dumps(envelope)
    assert all(isinstance(value, str) for value in envelope.values())


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        ({"content": "你好" * 1000}, 202, None),  # exactly 4000 weighted
        ({"content": "你好" * 1000 + "a"}, 422, "content"),  # 4001
        ({"content": "a" * 4000}, 202, None),
        ({"content": "a" * 4001}, 422, "content"),
        ({"content": "x", "notes": "한" * 1000}, 202, None),  # notes: 2000 weighted
        ({"content": "x", "notes": "한" * 1000 + "b"}, 422, "notes"),
        ({"content": "x", "url": "https://e.org/" + "p" * 286}, 202, None),  # 300 characters
        ({"content": "x", "url": "https://e.org/" + "p" * 287}, 422, "url"),
        ({"content": "x", "url": "ftp://example.org/file"}, 422, "url"),
        ({"content": "x", "url": "javascript:alert(1)"}, 422, "url"),
        ({"content": "x", "url": "https://"}, 422, "url"),
        ({"content": "x", "accept_reply": False}, 202, None),
        ({"content": "x", "accept_reply": "no"}, 422, "accept_reply"),
        ({"content": "   \n\t "}, 422, "content"),
        ({"content": ""}, 422, "content"),
        ({"content": 42}, 422, "content"),
        ({"content": "bad \x00 byte"}, 422, "content"),
        ({}, 422, "content"),
        ({"content": "x", "colour": "red"}, 422, "colour"),
    ],
)
def test_validation_boundaries(api_client, body, status, field):
    response = post(api_client, body)
    assert response.status_code == status, response.content
    if status == 422:
        error = response.json()["error"]
        assert error["code"] == "invalid"
        assert error["field"] == field
        assert field in error["message"]
        assert counts() == (0, 0, 0)
    else:
        assert counts() == (1, 1, 1)


def test_malformed_json_is_400(api_client):
    response = post(api_client, '{"content": "unterminated')
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "bad_request"
    assert counts() == (0, 0, 0)


def test_body_over_the_cap_is_413(api_client, settings):
    settings.API_MAX_BODY_BYTES = 2048
    response = post(api_client, {"content": "a" * 3000})
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "payload_too_large"
    assert counts() == (0, 0, 0)


@pytest.mark.parametrize(
    "authorization",
    [None, "Bearer", "Bearer ef_unknown-token", "Basic dXNlcjpwYXNz", "Bearer not-even-our-format"],
)
def test_missing_or_unknown_token_is_401(authorization):
    headers = {"HTTP_AUTHORIZATION": authorization} if authorization else {}
    response = post(Client(), {"content": "hi"}, **headers)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthorized"
    assert counts() == (0, 0, 0)


def test_revoked_token_and_inactive_agent_are_401():
    agent, token = make_agent()
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    assert post(client, {"content": "first"}).status_code == 202
    agent_token_revoke(token=agent.tokens.get())
    assert post(client, {"content": "second"}).status_code == 401

    other, other_token = make_agent()
    other.is_active = False
    other.save(update_fields=["is_active"])
    assert post(Client(HTTP_AUTHORIZATION=f"Bearer {other_token}"), {"content": "x"}).status_code == 401
    assert RawItem.objects.count() == 1


def test_token_is_stored_only_as_hash(agent_and_token):
    agent, token = agent_and_token
    record = agent.tokens.get()
    assert token not in (record.token_hash, record.prefix)
    assert token.startswith(record.prefix)
    assert len(record.token_hash) == 64


def test_idempotent_replay_returns_the_same_item(api_client):
    body = {"content": "Selling a used 3090, EU shipping"}
    first = post(api_client, body, HTTP_IDEMPOTENCY_KEY="key-1")
    second = post(api_client, body, HTTP_IDEMPOTENCY_KEY="key-1")
    assert first.status_code == 202
    assert second.status_code == 200
    assert second.json()["item_id"] == first.json()["item_id"]
    assert counts() == (1, 1, 1)


def test_same_key_with_different_body_is_422(api_client):
    assert post(api_client, {"content": "one"}, HTTP_IDEMPOTENCY_KEY="key-2").status_code == 202
    conflict = post(api_client, {"content": "two"}, HTTP_IDEMPOTENCY_KEY="key-2")
    assert conflict.status_code == 422
    assert conflict.json()["error"]["code"] == "idempotency_conflict"
    assert counts() == (1, 1, 1)


def test_idempotency_keys_are_per_agent(api_client):
    body = {"content": "same words"}
    mine = post(api_client, body, HTTP_IDEMPOTENCY_KEY="shared").json()["item_id"]
    _, token = make_agent()
    theirs = post(Client(HTTP_AUTHORIZATION=f"Bearer {token}"), body, HTTP_IDEMPOTENCY_KEY="shared")
    assert theirs.status_code == 202 and theirs.json()["item_id"] != mine
    assert IdempotencyKey.objects.count() == 2


def test_a_failure_inside_the_transaction_leaves_no_rows(api_client, monkeypatch):
    import items.services.publish as publish

    def explode(**kwargs):
        raise RuntimeError("outbox write failed")

    monkeypatch.setattr(publish, "outbox_event_create", explode)
    client = Client(raise_request_exception=False, HTTP_AUTHORIZATION=api_client.defaults["HTTP_AUTHORIZATION"])
    response = post(client, {"content": "will not stick"}, HTTP_IDEMPOTENCY_KEY="k")
    assert response.status_code == 500
    assert counts() == (0, 0, 0)
    assert IdempotencyKey.objects.count() == 0


def test_database_outage_is_503(api_client, monkeypatch):
    import items.api.publishing as publishing

    def down(**kwargs):
        raise OperationalError("connection refused")

    monkeypatch.setattr(publishing, "item_publish", down)
    response = post(api_client, {"content": "x"})
    assert response.status_code == 503
    assert response["Retry-After"]
    assert response.json()["error"]["code"] == "unavailable"


def test_openapi_and_docs(client):
    schema = client.get("/api/v1/openapi.json")
    assert schema.status_code == 200
    doc = schema.json()
    operation = doc["paths"]["/api/v1/items/publish"]["post"]
    assert {"202", "401", "413", "422"} <= set(operation["responses"])
    assert "BearerAuth" in json.dumps(doc["components"]["securitySchemes"]) or doc["components"]["securitySchemes"]
    assert client.get("/api/v1/docs").status_code == 200


def test_idempotency_keys_are_kept_24h_and_pruned_after_the_ttl(api_client, settings):
    from datetime import timedelta

    from django.utils import timezone

    from items.services.publish import idempotency_keys_prune

    settings.IDEMPOTENCY_TTL_HOURS = 24
    post(api_client, {"content": "old"}, HTTP_IDEMPOTENCY_KEY="old")
    post(api_client, {"content": "recent"}, HTTP_IDEMPOTENCY_KEY="recent")
    IdempotencyKey.objects.filter(key="old").update(created_at=timezone.now() - timedelta(hours=25))
    IdempotencyKey.objects.filter(key="recent").update(created_at=timezone.now() - timedelta(hours=23))
    assert idempotency_keys_prune() == 1
    assert list(IdempotencyKey.objects.values_list("key", flat=True)) == ["recent"]
    # The recent key still replays.
    assert post(api_client, {"content": "recent"}, HTTP_IDEMPOTENCY_KEY="recent").status_code == 200


def test_publish_works_while_redis_is_down(api_client, settings, tmp_path):
    settings.REDIS_URL = f"unix://{tmp_path}/no-redis-here.sock"
    response = post(api_client, {"content": "Redis is down but PostgreSQL is fine"})
    assert response.status_code == 202
    assert counts() == (1, 1, 1)


def test_token_use_is_recorded_at_most_once_a_minute(api_client, agent_and_token):
    agent, _ = agent_and_token
    record = agent.tokens.get()
    assert record.last_used_at is None
    assert api_client.get("/api/v1/agents/me").status_code == 200
    record.refresh_from_db()
    first = record.last_used_at
    assert first is not None
    assert api_client.get("/api/v1/agents/me").json()["agent_id"] == str(agent.pk)
    record.refresh_from_db()
    assert record.last_used_at == first
