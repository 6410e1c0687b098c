"""Drives the real cg:item:publish consumer: `run_pipeline --burst` subprocesses against the test database,
the test Redis and the fake OpenAI-compatible server (whose request log counts every model call)."""

from __future__ import annotations

import math
import signal

import pytest

from items.events import ITEM_PUBLISHED, STREAM_ITEM_PUBLISH
from pipeline.consumers.item_publish import ItemPublishConsumer
from pipeline.runtime.event import Event, Lease
from tests.pipeline.runtime.fixtures import pipeline_env, run_pipeline, wait_for  # noqa: F401 - fixtures

ENRICHMENT_MODULES = "pipeline.consumers.item_publish"


@pytest.fixture
def enrich(fake_llm, run_pipeline):  # noqa: F811 - the imported fixture
    """enrich(**env) runs one burst of the enrichment consumer (with the relay) and returns its output."""

    def burst(**env: str) -> str:
        process = run_pipeline(
            "--burst",
            "--consumer",
            "item-publish",
            env={
                **fake_llm.env(),
                "PIPELINE_EXTRA_CONSUMER_MODULES": ENRICHMENT_MODULES,
                "PIPELINE_RETRY_BASE_SECONDS": "0.05",
                "PIPELINE_RETRY_MAX_SECONDS": "0.2",
                "PIPELINE_LEASE_SECONDS": "5",
                **env,
            },
        )
        code = process.wait(90)
        output = process.output()
        assert code == 0, output[-4000:]
        return output

    return burst


def unit(*components: float, dimensions: int = 384) -> list[float]:
    """A unit vector with the given leading components (the rest zero)."""
    vector = list(components) + [0.0] * (dimensions - len(components))
    norm = math.sqrt(sum(c * c for c in vector))
    return [c / norm for c in vector]


def at_cosine(cosine: float, dimensions: int = 384) -> list[float]:
    """A unit vector whose cosine with unit(1) is exactly `cosine`."""
    return unit(cosine, math.sqrt(max(0.0, 1 - cosine * cosine)), dimensions=dimensions)


def publish_entry(item_id: int, lease: Lease | None = None) -> Event:
    """The `item.published` stream entry of `item_id`, as the enrichment consumer receives it (first delivery)."""
    return Event(
        stream=STREAM_ITEM_PUBLISH,
        group=ItemPublishConsumer.group,
        message_id="1-1",
        delivery_count=1,
        envelope={},
        id="event-1",
        type=ITEM_PUBLISHED,
        subject=str(item_id),
        data={"item_id": str(item_id)},
        replay=False,
        correlation_id="event-1",
        causation_id="",
        traceparent="",
        lease=lease or Lease(),
    )


def pending_entries(redis_client) -> list[dict]:
    """The item-publish group's entries delivered and not yet acknowledged."""
    return redis_client.xpending_range(STREAM_ITEM_PUBLISH, ItemPublishConsumer.group, "-", "+", 10)


def kill_then_reclaim(first, start, redis_client, env: dict[str, str]) -> None:
    """SIGKILL the enrichment process `first` mid-item, wait until its stream entry has been idle past the lease
    (PIPELINE_LEASE_SECONDS 1.5 in `env`), then let a --burst run (`start`: the run_pipeline fixture) reclaim
    and finish it."""
    first.signal(signal.SIGKILL)
    assert first.wait(10) == -signal.SIGKILL
    idle = lambda: all(p["time_since_delivered"] > 1600 for p in pending_entries(redis_client))  # noqa: E731
    wait_for(idle, 10, message="the entry idle")
    again = start("--burst", "--consumer", "item-publish", "--no-housekeeping", env=env)
    assert again.wait(60) == 0, again.output()[-3000:]
