"""The groups downstream of enrichment: feedback counters (cg:item:stats), the audit log (cg:audit) and
live WebSocket pushes (cg:item:notify), each driven by a real `run_pipeline` process."""

from __future__ import annotations

import asyncio
import json

import pytest
from channels.layers import channel_layers
from channels.testing import WebsocketCommunicator
from django.test import Client

from items.events import ITEM_COMPLETED, STREAM_ITEM_EVENTS, STREAM_ITEM_STATS
from items.events_socket import CLOSE_UNAUTHORIZED
from items.models import ItemFeedback, ItemStats
from pipeline.models import AuditEvent
from tests.factories import make_agent, make_completed_item, make_item

ALL = ",".join(f"pipeline.consumers.{name}" for name in ("item_publish", "item_stats", "audit", "item_notify"))


@pytest.fixture
def burst(fake_llm, run_pipeline):
    def run(*consumers: str, **env: str) -> str:
        args = ["--burst"]
        for name in consumers:
            args += ["--consumer", name]
        process = run_pipeline(*args, env={**fake_llm.env(), "PIPELINE_EXTRA_CONSUMER_MODULES": ALL, **env})
        assert process.wait(90) == 0, process.output()[-4000:]
        return process.output()

    return run


def redeliver_everything(redis_client, stream: str) -> int:
    """Append a second copy of every entry of the stream: what a lost ACK or a replay looks like."""
    entries = redis_client.xrange(stream)
    for _, fields in entries:
        redis_client.xadd(stream, fields)
    return len(entries)


def feedback(client: Client, item_id: int, score: int) -> None:
    response = client.post(
        f"/api/v1/items/{item_id}/feedback", data=json.dumps({"score": score}), content_type="application/json"
    )
    assert response.status_code == 202


def test_feedback_counts_each_reader_once_even_when_redelivered(burst, redis_client):
    author, _ = make_agent()
    item = make_completed_item(author)
    readers = [Client(HTTP_AUTHORIZATION=f"Bearer {make_agent()[1]}") for _ in range(3)]
    feedback(readers[0], item.pk, 2)
    feedback(readers[1], item.pk, 1)
    feedback(readers[2], item.pk, -1)
    feedback(readers[0], item.pk, 1)  # reader 0 changes their mind: replaces, not adds
    burst("item-stats")
    stats = ItemStats.objects.get(item=item)
    expected = (3, 1, 1, 0, 2, 0)
    actual = (stats.readers, stats.score_sum, stats.score_minus_one, stats.score_zero, stats.score_one, stats.score_two)
    assert actual == expected
    assert redeliver_everything(redis_client, STREAM_ITEM_STATS) == 4
    burst("item-stats")
    stats.refresh_from_db()
    after = (stats.readers, stats.score_sum, stats.score_minus_one, stats.score_zero, stats.score_one, stats.score_two)
    assert after == expected
    assert ItemFeedback.objects.filter(item=item).count() == 3


def test_audit_records_every_outcome_event_once(burst, redis_client):
    author, _ = make_agent()
    ids = [make_item(author, f"audit me {n}").pk for n in range(3)]
    burst("item-publish", "audit")
    assert AuditEvent.objects.count() == 3
    assert set(AuditEvent.objects.values_list("subject", flat=True)) == {str(pk) for pk in ids}
    assert set(AuditEvent.objects.values_list("event_type", flat=True)) == {ITEM_COMPLETED}
    redeliver_everything(redis_client, STREAM_ITEM_EVENTS)
    burst("audit")
    assert AuditEvent.objects.count() == 3


async def _close_consumer_connections() -> None:
    """Sync consumers run in asgiref's shared thread, whose database connection would outlive the test."""
    from channels.db import database_sync_to_async
    from django.db import connections

    await database_sync_to_async(connections.close_all)()


def _ws_application():
    """The real ASGI application that `make run` serves."""
    from eigenflux.asgi import application

    return application


def test_websocket_receives_item_completed_after_a_publish(burst, settings):
    channel_layers.backends.clear()  # use this test's Redis database
    author, token = make_agent()

    item_id = make_item(author, "Looking for a Rust reviewer").pk  # published; the pipeline has not run yet

    async def scenario():
        socket = WebsocketCommunicator(_ws_application(), f"/ws/v1/events?token={token}")
        connected, _ = await socket.connect()
        assert connected
        # Idle longer than redis-py's default 5 s socket timeout: the channel layer's blocking read must survive.
        await asyncio.sleep(6)
        await asyncio.to_thread(burst, "item-publish", "item-notify")
        event = await socket.receive_json_from(timeout=10)
        await socket.disconnect()
        await _close_consumer_connections()
        return event

    event = asyncio.run(scenario())
    assert event["type"] == ITEM_COMPLETED
    assert event["item_id"] == str(item_id)
    assert event["status"] == "completed"
    assert event["id"]


def test_websocket_with_a_bad_token_is_closed_with_4401(transactional_db):
    async def scenario():
        socket = WebsocketCommunicator(_ws_application(), "/ws/v1/events?token=ef_not-a-token")
        connected, _ = await socket.connect()
        error = await socket.receive_json_from(timeout=5)
        closed = await socket.receive_output(timeout=5)
        # The client side is torn down too: a consumer left running would be cancelled by asyncio.run, which
        # can hang on the channel layer's pending receive.
        await socket.disconnect()
        await _close_consumer_connections()
        return connected, error, closed

    connected, error, closed = asyncio.run(scenario())
    assert connected
    assert error["error"]["code"] == "unauthorized"
    assert closed == {"type": "websocket.close", "code": CLOSE_UNAUTHORIZED}


def test_a_replay_for_one_group_is_acknowledged_unhandled_by_the_others(burst, redis_client):
    from django.db import transaction

    from items.events import ITEM_COMPLETED as COMPLETED
    from items.outbox import outbox_event_create

    author, _ = make_agent()
    item = make_completed_item(author)
    with transaction.atomic():
        outbox_event_create(
            stream=STREAM_ITEM_EVENTS,
            event_type=COMPLETED,
            subject=str(item.pk),
            data={"item_id": str(item.pk), "author_id": str(author.pk), "status": "completed"},
            replay=True,
            target_group="cg:item:notify",  # e.g. a requeued dead letter of the notify group
        )
    burst("audit")
    assert not AuditEvent.objects.exists()
    (group,) = redis_client.xinfo_groups(STREAM_ITEM_EVENTS)
    assert (group["name"], group["pending"]) == ("cg:audit", 0)
