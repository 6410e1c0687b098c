"""One trace per item (eigenflux.base.tracing): the publish request and its outbox write traced in this process (the
SDK's in-memory exporter), the relay, the consumers and the model calls traced in real `run_pipeline`
processes that export over OTLP/HTTP to a receiver in the test; a redelivery after a SIGKILL; and no span
attribute carrying an item's content, a token or a prompt."""

from __future__ import annotations

import json
import signal
import uuid

import pytest
from django.db import connection, transaction
from django.test import Client
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from eigenflux.base import tracing
from items.events import STREAM_ITEM_EVENTS, STREAM_ITEM_PUBLISH
from items.models import OutboxEvent
from items.outbox import outbox_event_create
from tests.factories import make_agent
from tests.fakes.openai_server import texts_in
from tests.fakes.otlp_receiver import OTLPReceiver, PlainSpan, plain_span_from_sdk
from tests.pipeline.runtime.consumers import TEST_GROUP, TEST_STREAM, TEST_TYPE
from tests.pipeline.runtime.fixtures import wait_for

pytestmark = pytest.mark.slow

CONSUMERS = ("item_publish", "official_firstbroadcast", "audit", "item_notify")
DELIVERY_COUNT = "messaging.redis.message.delivery_count"


@pytest.fixture(scope="module")
def local_spans():
    """Tracing installed in this process with an in-memory exporter, for this module only."""
    exporter = InMemorySpanExporter()
    assert tracing.setup("test", span_exporter=exporter, batch=False)
    try:
        yield exporter
    finally:
        tracing.uninstall()
        reconnect()  # connections made while instrumented would go on tracing


def reconnect() -> None:
    """Drop this thread's database connection and the pool's, so that the next one is made afresh."""
    connection.close()
    connection.close_pool()


@pytest.fixture
def receiver():
    server = OTLPReceiver().start()
    try:
        yield server
    finally:
        server.stop()


def spans_of(exporter: InMemorySpanExporter) -> list[PlainSpan]:
    return [plain_span_from_sdk(span) for span in exporter.get_finished_spans()]


def one(spans: list[PlainSpan], name: str, **attributes) -> PlainSpan:
    found = [s for s in spans if s.name == name and all(s.attributes.get(k) == v for k, v in attributes.items())]
    assert len(found) == 1, f"{len(found)} spans named {name!r} with {attributes}:\n{tree(spans)}"
    return found[0]


def tree(spans: list[PlainSpan]) -> str:
    """The spans as an indented tree (failure messages)."""
    children: dict[str, list[PlainSpan]] = {}
    ids = {s.span_id for s in spans}
    for span in sorted(spans, key=lambda s: s.start_ns):
        children.setdefault(span.parent_span_id if span.parent_span_id in ids else "", []).append(span)
    lines: list[str] = []

    def walk(parent: str, depth: int) -> None:
        for span in children.get(parent, []):
            lines.append(f"{'  ' * depth}{span.name} [{span.service}] {span.duration_ms:.1f} ms")
            walk(span.span_id, depth + 1)

    walk("", 0)
    return "\n".join(lines)


def test_one_trace_from_the_publish_request_to_the_downstream_consumers(local_spans, receiver, run_pipeline, fake_llm):
    reconnect()  # the next connection is made by the instrumented psycopg
    local_spans.clear()
    marker = f"ZQX-{uuid.uuid4().hex}"
    content = f"Offering spare GPU hours this weekend, reference {marker}, ask me anything"
    _, token = make_agent()
    response = Client(HTTP_AUTHORIZATION=f"Bearer {token}").post(
        "/api/v1/items/publish", data=json.dumps({"content": content}), content_type="application/json"
    )
    assert response.status_code == 202, response.content
    item_id = response.json()["item_id"]

    local = spans_of(local_spans)
    request = next(s for s in local if s.kind == "SERVER")
    trace_id = request.trace_id
    assert request.parent_span_id == ""  # the publish request is the trace's root
    assert request.attributes.get("http.request.method", request.attributes.get("http.method")) == "POST"
    create = one(local, f"create {STREAM_ITEM_PUBLISH}")
    assert (create.trace_id, create.parent_span_id) == (trace_id, request.span_id)
    assert create.attributes["messaging.system"] == "redis"
    # The database work of the request, by the psycopg instrumentation, in the same trace.
    inserts = [
        s
        for s in local
        if s.trace_id == trace_id and s.attributes.get("db.system.name", s.attributes.get("db.system")) == "postgresql"
    ]
    assert inserts, tree(local)
    event = OutboxEvent.objects.get(stream=STREAM_ITEM_PUBLISH, subject=item_id)
    version, traced, parent, flags = event.envelope["traceparent"].split("-")
    assert (version, traced, parent) == ("00", trace_id, create.span_id) and int(flags, 16) & 1  # sampled
    assert create.attributes["messaging.message.id"] == str(event.event_id)

    modules = ",".join(f"pipeline.consumers.{name}" for name in CONSUMERS)
    args = ["--burst"]
    for name in ("item-publish", "official-firstbroadcast", "audit", "item-notify"):
        args += ["--consumer", name]
    process = run_pipeline(*args, env={**fake_llm.env(), **receiver.env(), "PIPELINE_EXTRA_CONSUMER_MODULES": modules})
    assert process.wait(90) == 0, process.output()[-4000:]

    remote = [s for s in receiver.snapshot() if s.trace_id == trace_id]
    everything = local + remote
    relay = one(remote, f"publish {STREAM_ITEM_PUBLISH}")
    assert relay.parent_span_id == create.span_id and relay.kind == "PRODUCER"
    assert relay.service == "eigenflux-pipeline"
    handling = one(remote, f"process {STREAM_ITEM_PUBLISH}", **{"messaging.consumer.group.name": "cg:item:publish"})
    assert handling.parent_span_id == relay.span_id and handling.kind == "CONSUMER"
    assert handling.attributes[DELIVERY_COUNT] == 1 and handling.links == []
    official = one(
        remote, f"process {STREAM_ITEM_PUBLISH}", **{"messaging.consumer.group.name": "cg:official:firstbroadcast"}
    )
    assert official.parent_span_id == relay.span_id

    model_calls = [s for s in remote if "gen_ai.operation.name" in s.attributes]
    assert model_calls, tree(everything)
    # Enrichment's calls (embedding, safety, analysis...) and the official agent's reply, each below its handler.
    assert {c.attributes["gen_ai.operation.name"] for c in model_calls if c.parent_span_id == handling.span_id} == {
        "chat",
        "embeddings",
    }
    for call in model_calls:
        assert call.parent_span_id in (handling.span_id, official.span_id)
        assert (
            call.kind == "CLIENT"
            and call.name == f"{call.attributes['gen_ai.operation.name']} {call.attributes['gen_ai.request.model']}"
        )
        assert call.attributes["gen_ai.request.model"] in {"fake-main", "fake-safety", "fake-embedding"}
        assert call.attributes["eigenflux.prompt.name"]
        assert call.attributes["eigenflux.model_call.outcome"] == "ok"
        assert call.attributes["gen_ai.usage.input_tokens"] > 0
    assert len(model_calls) == len(fake_llm.requests)  # one span per model request the fake server answered

    outcome = one(remote, f"create {STREAM_ITEM_EVENTS}")
    assert outcome.parent_span_id == handling.span_id
    relayed_outcome = one(remote, f"publish {STREAM_ITEM_EVENTS}")
    assert relayed_outcome.parent_span_id == outcome.span_id
    for group in ("cg:audit", "cg:item:notify"):
        downstream = one(remote, f"process {STREAM_ITEM_EVENTS}", **{"messaging.consumer.group.name": group})
        assert downstream.parent_span_id == relayed_outcome.span_id

    # Nothing in any span of the item's trace names its content, the agent's token or the prompts.
    prompt_lines = {
        line.strip()
        for request in fake_llm.requests
        for text in texts_in({k: v for k, v in request.json.items() if k != "model"})
        for line in text.splitlines()
        if len(line.strip()) >= 30
    }
    assert prompt_lines  # the check below has something to look for
    values = [
        str(v)
        for s in everything
        for v in [*s.attributes.values(), *(a for *_, attrs in s.links for a in attrs.values())]
    ]
    values += [s.name for s in everything]
    for value in values:
        assert marker not in value
        assert token not in value
        assert not any(line in value for line in prompt_lines), value


def test_a_redelivery_after_sigkill_continues_the_trace_and_links_to_the_first_attempt(
    local_spans, receiver, run_pipeline, test_env, effects, redis_client
):
    local_spans.clear()
    with transaction.atomic():
        event = outbox_event_create(
            stream=TEST_STREAM, event_type=TEST_TYPE, subject="s0", data={"seq": 0, "sleep_first": 30}
        )
    create = one(spans_of(local_spans), f"create {TEST_STREAM}")
    env = {**test_env, **receiver.env()}
    args = ("--consumer", "test-effects", "--no-housekeeping")
    victim = run_pipeline(*args, env=env)
    wait_for(lambda: redis_client.lrange("t:started", 0, -1), 30, message="the first attempt starts")
    relay = wait_for(
        lambda: [s for s in receiver.snapshot() if s.name == f"publish {TEST_STREAM}"], 10, message="relay span"
    )[0]
    victim.signal(signal.SIGKILL)
    assert victim.wait(10) == -signal.SIGKILL
    assert not [s for s in receiver.snapshot() if s.name == f"process {TEST_STREAM}"]  # died with its process

    rescuer = run_pipeline(*args, "--no-relay", env=env)
    wait_for(lambda: effects.count() == 1, 40, message="the rescuer handles the entry")
    rescuer.terminate()
    assert rescuer.wait(20) == 0
    assert redis_client.lrange(f"t:deliveries:{event.event_id}", 0, -1) == ["1", "2"]

    handled = one(receiver.snapshot(), f"process {TEST_STREAM}")
    assert handled.trace_id == create.trace_id == relay.trace_id
    assert relay.parent_span_id == create.span_id
    assert handled.parent_span_id == relay.span_id  # continued from the entry's traceparent
    assert handled.attributes[DELIVERY_COUNT] == 2
    assert handled.attributes["messaging.consumer.group.name"] == TEST_GROUP
    # Linked to the context the first (killed) attempt continued, with the delivery count.
    assert handled.links == [(relay.trace_id, relay.span_id, {DELIVERY_COUNT: 2})]
