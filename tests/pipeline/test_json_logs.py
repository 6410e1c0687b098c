"""LOG_FORMAT=json on a real `run_pipeline --burst`: every line it writes is one JSON object; the lines written
while an item is handled carry the item, event, trace, stream, group, consumer and delivery count; nothing
secret (nor the item's content) is in any line."""

from __future__ import annotations

import json

import pytest
from django.conf import settings as django_settings

from items.events import ITEM_PUBLISHED, STREAM_ITEM_PUBLISH
from items.models import ItemStatus, OutboxEvent, ProcessedItem
from items.services.publish import item_publish
from tests.factories import make_agent
from tests.fakes.fixtures import EMBEDDING_KEY, MAIN_KEY, SAFETY_KEY
from tests.fakes.openai_server import Fault
from tests.pipeline.runtime.fixtures import pipeline_env, run_pipeline  # noqa: F401 - fixtures

CONTENT = "Offering two spare RTX boards for weekend inference jobs, ping me"


def json_lines(output: str) -> list[dict]:
    records = []
    for number, line in enumerate(output.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            pytest.fail(f"line {number} is not JSON: {line[:300]!r}")
        assert isinstance(record, dict) and {"time", "level", "logger", "message"} <= set(record), line
        records.append(record)
    return records


@pytest.mark.slow
def test_burst_logs_are_json_lines_with_the_ids_and_no_secret(run_pipeline, fake_llm):  # noqa: F811
    agent, token = make_agent()
    item = item_publish(author=agent, content=CONTENT).item
    envelope = OutboxEvent.objects.get(subject=str(item.pk), event_type=ITEM_PUBLISHED).envelope
    # The safety model fails every attempt of the first delivery: the runtime retries, the second succeeds.
    fake_llm.script("safety", *[Fault.server_error()] * 3)

    process = run_pipeline(
        "--burst",
        env={
            **fake_llm.env(),
            "LOG_FORMAT": "json",
            "PIPELINE_RETRY_BASE_SECONDS": "0.05",
            "PIPELINE_RETRY_MAX_SECONDS": "0.2",
        },
    )
    assert process.wait(120) == 0, process.output()[-4000:]
    output = process.output()
    records = json_lines(output)
    assert ProcessedItem.objects.get(pk=item.pk).status == ItemStatus.COMPLETED

    banner = [r for r in records if r["message"] == "run_pipeline settings"]
    assert banner and banner[0]["settings"]["SECRET_KEY"] == "****"

    handling = [r for r in records if r.get("group") == "cg:item:publish" and r.get("item_id") == str(item.pk)]
    first = [r for r in handling if r["delivery_count"] == 1]
    assert any(r["message"].startswith("model call safety attempt 1 failed") for r in first)  # the model layer
    assert any(r["logger"] == "pipeline.runtime.handling" and "retrying" in r["message"] for r in first)  # the runtime
    completed = [r for r in handling if r["message"].startswith(f"item {item.pk} completed")]
    assert len(completed) == 1 and completed[0]["delivery_count"] == 2 and completed[0]["level"] == "INFO"
    for record in handling:
        assert record["event_id"] == envelope["id"]
        assert record["correlation_id"] == envelope["correlationid"]
        assert record["trace_id"] == envelope["traceparent"].split("-")[1]
        assert record["stream"] == STREAM_ITEM_PUBLISH
        assert record["consumer"].startswith("item-publish-")
        assert record["message_id"]

    # The official agent's group handled the same event: its lines name their own group and consumer.
    for record in records:
        if record.get("group") == "cg:official:firstbroadcast":
            assert record["consumer"].startswith("official-firstbroadcast-") and record["event_id"] == envelope["id"]

    for secret in (token, MAIN_KEY, SAFETY_KEY, EMBEDDING_KEY, django_settings.SECRET_KEY, CONTENT):
        assert secret not in output
