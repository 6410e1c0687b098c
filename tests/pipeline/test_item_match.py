"""The cg:item:match consumer (docs/feed.md#match-push): in-process for its outcomes, and through a real
`run_pipeline` process and a real WebSocket for delivery, including a redelivered event."""

from __future__ import annotations

import asyncio

import pytest
from django.db import transaction

from items.events import ITEM_COMPLETED, STREAM_ITEM_EVENTS
from items.models import OutboxEvent, ProcessedItem
from items.outbox import outbox_event_create
from items.services.agents import agent_token_create
from pipeline.consumers.item_match import ItemMatchConsumer
from pipeline.runtime import DeadLetterNow, NothingToDo
from tests.factories import outbox_stream_event
from tests.items.feed.conftest import basis, item, reader_with
from tests.items.test_match_push import online
from tests.items.test_ws_auth import _fresh_channel_layer, close_connections, socket  # noqa: F401
from tests.pipeline.runtime.fixtures import pipeline_env, run_pipeline  # noqa: F401 - fixtures

pytestmark = pytest.mark.django_db(transaction=True)
SEEKS = basis(7)


def completed(created: ProcessedItem, **data) -> OutboxEvent:
    with transaction.atomic():
        return outbox_event_create(
            stream=STREAM_ITEM_EVENTS,
            event_type=ITEM_COMPLETED,
            subject=str(created.pk),
            data={"item_id": str(created.pk), "author_id": str(created.author_id), "status": "completed", **data},
        )


def handle(row: OutboxEvent) -> None:
    ItemMatchConsumer().handle(outbox_stream_event(row, group=ItemMatchConsumer.group))


def test_the_consumer_pushes_once_and_says_when_there_is_nothing_to_do():
    online(reader_with(seeks_vector=SEEKS))
    row = completed(item(embedding=SEEKS, quality=0.9))
    handle(row)  # pushed: returns
    with pytest.raises(NothingToDo):
        handle(row)  # the same event again: already pushed
    with pytest.raises(NothingToDo):
        handle(completed(item(embedding=basis(250), quality=0.9)))  # nobody's match


def test_a_replayed_completion_pushes_nothing_and_says_so(caplog):
    import dataclasses

    online(reader_with(seeks_vector=SEEKS))
    created = item(embedding=SEEKS, quality=0.9)
    event = dataclasses.replace(outbox_stream_event(completed(created), group=ItemMatchConsumer.group), replay=True)
    with caplog.at_level("INFO", logger="items.services.match_push"), pytest.raises(NothingToDo):
        ItemMatchConsumer().handle(event)
    assert [r.getMessage() for r in caplog.records if r.name == "items.services.match_push"] == [
        f"match push of item {created.pk}: nobody, the completion is a replay (old news)"
    ]


def test_an_event_without_an_item_id_is_dead_lettered():
    created = item(embedding=SEEKS)
    with pytest.raises(DeadLetterNow):
        handle(completed(created, item_id="not-a-number"))


@pytest.mark.slow
def test_a_real_pipeline_pushes_item_matched_once_even_when_redelivered(fake_llm, run_pipeline, redis_client):  # noqa: F811
    reader = reader_with(seeks_vector=SEEKS)
    token = agent_token_create(agent=reader).token
    created = item(embedding=SEEKS, quality=0.9)
    completed(created)  # relayed by the burst, once the socket is open

    def burst() -> None:
        env = {**fake_llm.env(), "PIPELINE_EXTRA_CONSUMER_MODULES": "pipeline.consumers.item_match"}
        process = run_pipeline("--burst", "--consumer", "item-match", env=env)
        assert process.wait(90) == 0, process.output()[-4000:]

    async def scenario():
        ws = socket(f"/ws/v1/events?token={token}")
        assert (await ws.connect())[0]
        await asyncio.to_thread(burst)
        first = await ws.receive_json_from(timeout=10)
        for _, fields in redis_client.xrange(STREAM_ITEM_EVENTS):  # a lost ACK: the same entry again
            redis_client.xadd(STREAM_ITEM_EVENTS, fields)
        await asyncio.to_thread(burst)
        again = await ws.receive_nothing(timeout=1)
        await ws.disconnect()
        await close_connections()
        return first, again

    first, again = asyncio.run(scenario())
    assert (first["type"], first["item_id"], first["matched"]) == ("item.matched", str(created.pk), "seeks")
    assert again
