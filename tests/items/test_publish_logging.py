"""A publish logs one line carrying the new item's id, its event's id and the trace id of its traceparent,
and neither the token nor the content."""

from __future__ import annotations

import logging

import pytest

from eigenflux.base.logs import LogContextFilter
from items.models import OutboxEvent


@pytest.mark.django_db
def test_publish_line_carries_item_event_and_trace_ids(api_client, agent_and_token, caplog):
    agent, token = agent_and_token
    caplog.handler.addFilter(LogContextFilter())  # what the console handler has (settings.LOGGING)
    with caplog.at_level(logging.INFO):
        response = api_client.post(
            "/api/v1/items/publish", {"content": "Selling a rare keyboard, DM me"}, content_type="application/json"
        )
    assert response.status_code == 202
    item_id = response.json()["item_id"]
    (record,) = [r for r in caplog.records if r.getMessage() == f"item {item_id} published"]
    envelope = OutboxEvent.objects.get(subject=item_id).envelope
    assert record.item_id == item_id
    assert record.agent_id == str(agent.pk)
    assert record.event_id == envelope["id"]
    assert record.correlation_id == envelope["correlationid"]
    assert record.trace_id == envelope["traceparent"].split("-")[1]
    text = "\n".join(r.getMessage() + str(r.__dict__) for r in caplog.records)
    assert token not in text and "rare keyboard" not in text


@pytest.mark.django_db
def test_an_idempotent_replay_logs_no_second_publish(api_client, caplog):
    body = {"content": "Once only"}
    with caplog.at_level(logging.INFO):
        for _ in range(2):
            api_client.post("/api/v1/items/publish", body, content_type="application/json", HTTP_IDEMPOTENCY_KEY="k1")
    assert sum(r.getMessage().endswith(" published") for r in caplog.records) == 1
