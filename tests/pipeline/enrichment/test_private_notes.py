"""Notes are the author's alone (docs/enrichment.md#notes-stay-private): an item published with a secret in its
notes goes through the real pipeline (`run_pipeline --burst`: the local analyzer, or the fake model server),
and no surface another agent reads or searches - the native item, feed and keyword/semantic/hybrid search,
the client API's feed and item - nor the author's outcome event holds a word of it."""

from __future__ import annotations

import asyncio
import json

import pytest
from channels.layers import channel_layers
from channels.testing import WebsocketCommunicator
from django.test import Client

from eigenflux.base.redis import get_redis
from items.events import ITEM_COMPLETED
from items.models import ItemStatus, ProcessedItem
from items.query_embeddings import cache_key
from tests.factories import make_agent
from tests.items.compat.conftest import CompatClient
from tests.pipeline.enrichment.test_downstream import _close_consumer_connections, _ws_application

SECRET = "quaxelbright"
SECRET_WORDS = (SECRET, "password", "lisbon")
CONTENT = "Renting out 200 spare A100 GPU hours this weekend at a discounted hourly rate, contact us for details."
FREE_TEXT_NOTES = f"Private: margin password {SECRET}, the trading desk in Lisbon owns these GPU hours."
HINT_NOTES = json.dumps(
    {
        "type": "supply",
        "domains": ["compute", f"{SECRET} desk"],
        "summary": f"Renting out spare A100 GPU hours this weekend, password {SECRET}",
        "keywords": ["gpu hours", f"password {SECRET}"],
        "expected_response": f"quote the password {SECRET} from Lisbon",
    }
)
QUERY = "spare A100 GPU hours"
MODULES = "pipeline.consumers.item_publish,pipeline.consumers.item_notify"


@pytest.fixture
def burst(run_pipeline):
    def run(*consumers: str, **env: str) -> None:
        args = ["--burst"] + [arg for name in consumers for arg in ("--consumer", name)]
        process = run_pipeline(*args, env={"PIPELINE_EXTRA_CONSUMER_MODULES": MODULES, **env})
        assert process.wait(120) == 0, process.output()[-4000:]

    return run


def publish(token: str, notes: str, content: str = CONTENT) -> int:
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    response = client.post(
        "/api/v1/items/publish", data={"content": content, "notes": notes}, content_type="application/json"
    )
    assert response.status_code == 202, response.content
    return int(response.json()["item_id"])


def found(body: dict, item_id: int) -> bool:
    return str(item_id) in {entry["item_id"] for entry in body["items"]}


def public_surfaces(item_id: int) -> dict[str, str]:
    """What another agent can read of the item, by surface; each must hold it (the item is public)."""
    _, token = make_agent()
    native = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    compat = CompatClient(make_agent()[1])
    surfaces = {"item": native.get(f"/api/v1/items/{item_id}").json(), "feed": native.get("/api/v1/feed").json()}
    assert found(surfaces["feed"], item_id)
    for mode in ("keyword", "semantic", "hybrid"):
        surfaces[f"search {mode}"] = native.get("/api/v1/search", {"q": QUERY, "mode": mode}).json()
        assert found(surfaces[f"search {mode}"], item_id), mode
    surfaces["compat feed"] = compat.get("/items/feed?action=refresh&limit=20")[1]
    assert str(item_id) in {entry["item_id"] for entry in surfaces["compat feed"]["data"]["items"]}
    surfaces["compat item"] = compat.get(f"/items/{item_id}")[1]
    assert surfaces["compat item"]["code"] == 0
    return {name: json.dumps(body, ensure_ascii=False).lower() for name, body in surfaces.items()}


def assert_notes_stay_private(item_id: int, fake_llm=None) -> None:
    item = ProcessedItem.objects.get(pk=item_id)
    assert item.status == ItemStatus.COMPLETED, (item.status, item.last_error)
    if fake_llm is not None:  # its embeddings are hashes of whole texts: point the query at the item
        fake_llm.set_embedding(QUERY, list(item.embedding))
        for key in get_redis().scan_iter(match=cache_key(QUERY, agent_id=0).replace(":0:", ":*:")):
            get_redis().delete(key)
    for name, text in public_surfaces(item_id).items():
        assert not [word for word in SECRET_WORDS if word in text], name
    native = Client(HTTP_AUTHORIZATION=f"Bearer {make_agent()[1]}")
    for mode in ("keyword", "semantic", "hybrid"):
        for query in (SECRET, f"margin password {SECRET} trading desk lisbon"):
            body = native.get("/api/v1/search", {"q": query, "mode": mode}).json()
            assert not found(body, item_id), (mode, query)


@pytest.mark.parametrize("notes", [FREE_TEXT_NOTES, HINT_NOTES], ids=["free text", "hints"])
def test_the_local_analyzer_leaves_no_word_of_the_notes_in_public(burst, settings, notes):
    # The hashing embedding counts words: a vector holding the notes would be found by their words.
    settings.LLM_PROVIDER, settings.LOCAL_EMBEDDING = "local", "hashing"
    _, token = make_agent()
    item_id = publish(token, notes)
    burst("item-publish", LLM_PROVIDER="local", LOCAL_EMBEDDING="hashing", LLM_API_KEY="", OPENAI_API_KEY="")
    assert_notes_stay_private(item_id)


def test_the_model_is_never_shown_the_notes_but_by_the_safety_gate(burst, fake_llm):
    channel_layers.backends.clear()  # use this test's Redis database
    _, token = make_agent()
    first = publish(token, FREE_TEXT_NOTES)
    second = publish(token, HINT_NOTES, content=f"{CONTENT} Minimum booking is ten hours.")

    async def scenario() -> list[dict]:
        socket = WebsocketCommunicator(_ws_application(), f"/ws/v1/events?token={token}")
        assert (await socket.connect())[0]
        await asyncio.to_thread(burst, "item-publish", "item-notify", **fake_llm.env())
        events = [await socket.receive_json_from(timeout=10) for _ in range(2)]
        await socket.disconnect()
        await _close_consumer_connections()
        return events

    events = asyncio.run(scenario())
    assert {(event["type"], event["item_id"]) for event in events} == {
        (ITEM_COMPLETED, str(first)),
        (ITEM_COMPLETED, str(second)),
    }
    assert SECRET not in json.dumps(events)
    leaked = [request.task for request in fake_llm.requests if SECRET in json.dumps(request.json)]
    assert leaked == ["safety", "safety"]  # the gate judges notes too (an injection may hide there)
    assert fake_llm.count("process_item") == fake_llm.count("embed") == 2
    for item_id in (first, second):
        assert_notes_stay_private(item_id, fake_llm)
