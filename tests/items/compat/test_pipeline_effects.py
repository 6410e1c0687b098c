"""Through the real pipeline (`run_pipeline --burst`, local analyzer): a client's publish with JSON notes
ends up with the declared expiry and without the notes' keys as keywords, and every feed delivery counts
once in the author's `consumed` statistic."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from items.models import ItemStats, ItemStatus, ProcessedItem
from tests.factories import make_agent
from tests.pipeline.runtime.fixtures import pipeline_env, run_pipeline  # noqa: F401 - fixtures

MODULES = "pipeline.consumers.item_publish,pipeline.consumers.item_stats"
EXPIRY = (datetime.now(UTC) + timedelta(days=40)).replace(hour=0, minute=0, second=0, microsecond=0)
NOTES = (
    '{"type":"demand","domains":["tech","hr"],"summary":"Go developer to review pgvector client",'
    f'"expire_time":"{EXPIRY:%Y-%m-%dT%H:%M:%SZ}",'
    '"source_type":"original","expected_response":"Go experience, rate","keywords":["pgvector"]}'
)


@pytest.fixture
def burst(run_pipeline):  # noqa: F811 - the imported fixture
    def run(*consumers: str) -> None:
        args = ["--burst"] + [arg for name in consumers for arg in ("--consumer", name)]
        process = run_pipeline(*args, env={"PIPELINE_EXTRA_CONSUMER_MODULES": MODULES, "LLM_PROVIDER": "local"})
        assert process.wait(120) == 0, process.output()[-4000:]

    return run


@pytest.mark.slow
def test_published_notes_become_hints_and_deliveries_are_counted(compat, burst):
    _, author_token = make_agent()
    _, reader_token = make_agent()
    content = "Looking for a Go developer to review a pgvector client this week, paid."
    _status, body, _ = compat(author_token).post("/items/publish", {"content": content, "notes": NOTES})
    item_id = int(body["data"]["item_id"])
    burst("item-publish")
    item = ProcessedItem.objects.get(pk=item_id)
    assert item.status == ItemStatus.COMPLETED
    assert item.expire_time == EXPIRY
    assert (item.broadcast_type, item.summary, item.keywords[0]) == (
        "demand",
        "Go developer to review pgvector client",
        "pgvector",
    )
    assert not {"type", "domains", "summary", "expire_time", "source_type"} & set(item.keywords)

    refresh = compat(reader_token).get("/items/feed?action=refresh&limit=5")[1]["data"]
    assert [i["item_id"] for i in refresh["items"]] == [str(item_id)]
    assert refresh["items"][0]["expire_time"] == f"{EXPIRY:%Y-%m-%dT%H:%M:%SZ}"
    assert compat(reader_token).get("/items/feed?action=refresh&limit=5")[1]["data"]["items"] == []
    burst("item-stats")
    assert ItemStats.objects.get(item_id=item_id).consumed == 1
    mine = compat(author_token).get("/agents/items")[1]["data"]["items"][0]
    assert mine["consumed_count"] == 1
    assert compat(author_token).get("/agents/me")[1]["data"]["influence"]["total_consumed"] == 1
    burst("item-stats")  # nothing new: a redelivered or repeated run counts nothing twice
    assert ItemStats.objects.get(item_id=item_id).consumed == 1
