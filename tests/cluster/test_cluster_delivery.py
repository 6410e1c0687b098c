"""The delivery path on a real 3-master Redis Cluster (tests.cluster.servers): publish -> relay -> enrichment ->
outcome events, a SIGKILLed consumer's entries reclaimed, a dead letter written once, MINID trimming, lag
metrics, and a master restarted in the middle of a run with nothing lost and nothing done twice."""

from __future__ import annotations

import signal
import time
from collections import Counter

import pytest
from redis.cluster import RedisCluster

from eigenflux.base.redis import get_redis
from items.events import OUTCOME_TYPES, STREAM_ITEM_EVENTS, STREAM_ITEM_PUBLISH
from items.models import ItemStatus, ProcessedItem
from pipeline import metrics
from pipeline.consumers.dead_letter_archive import DlqArchiver, dlq_archive_drain
from pipeline.housekeeping import poll_lag, trim_stream
from pipeline.models import DeadLetter
from pipeline.runtime.dead_lettering import ARCHIVE_GROUP, dead_letter
from pipeline.streams import DLQ_STREAMS, dlq_stream
from tests.factories import make_agent, make_item
from tests.pipeline.runtime.conftest import envelope
from tests.pipeline.runtime.consumers import TEST_GROUP, TEST_STREAM
from tests.pipeline.runtime.fixtures import wait_for

pytestmark = pytest.mark.slow
CONSUMER_MODULES = "tests.pipeline.runtime.consumers"
EFFECTS = ("--consumer", "test-effects", "--no-relay", "--no-housekeeping")


@pytest.fixture
def test_env(pipeline_env):
    return {
        **pipeline_env,
        "PIPELINE_EXTRA_CONSUMER_MODULES": CONSUMER_MODULES,
        "PIPELINE_LEASE_SECONDS": "1.5",
        "PIPELINE_BLOCK_MS": "200",
        "PIPELINE_GRACE_SECONDS": "10",
    }


def pending(client, stream=TEST_STREAM, group=TEST_GROUP) -> list[dict]:
    return client.xpending_range(stream, group, "-", "+", 1000)


def test_the_clients_are_cluster_clients(cluster):
    assert isinstance(get_redis(), RedisCluster) and isinstance(get_redis(raw=True), RedisCluster)
    assert len(cluster.client.get_primaries()) == 3


def test_publish_relay_enrichment_and_outcome_events_on_the_cluster(cluster, run_pipeline, fake_llm):
    author, _ = make_agent()
    pks = [make_item(author, f"Cluster broadcast {i}: renting a GPU in city {i}").pk for i in range(6)]
    process = run_pipeline(
        "--burst",
        "--consumer",
        "item-publish",
        env={
            **fake_llm.env(),
            "PIPELINE_EXTRA_CONSUMER_MODULES": "pipeline.consumers.item_publish",
            "PIPELINE_LEASE_SECONDS": "5",
        },
    )
    assert process.wait(120) == 0, process.output()[-4000:]
    assert ProcessedItem.objects.filter(pk__in=pks, status=ItemStatus.COMPLETED).count() == len(pks)
    client = cluster.client
    assert client.xlen(STREAM_ITEM_PUBLISH) == len(pks)
    assert pending(client, STREAM_ITEM_PUBLISH, "cg:item:publish") == []
    outcomes = Counter(
        fields["subject"] for _, fields in client.xrange(STREAM_ITEM_EVENTS) if fields["type"] in OUTCOME_TYPES
    )
    assert outcomes == Counter({str(pk): 1 for pk in pks})
    assert not client.exists(dlq_stream(STREAM_ITEM_PUBLISH))
    # The stream keys live on different masters: the run really spanned the cluster.
    nodes = {client.get_node_from_key(key).port for key in (STREAM_ITEM_PUBLISH, STREAM_ITEM_EVENTS)}
    assert nodes and "CROSSSLOT" not in process.output()


def test_a_dead_letter_is_written_once_and_archived_on_the_cluster(cluster, transactional_db):
    client = get_redis(raw=True)
    client.xgroup_create(TEST_STREAM, TEST_GROUP, id="0", mkstream=True)
    client.xadd(TEST_STREAM, envelope())
    [(_, [(message_id, fields)])] = client.xreadgroup(TEST_GROUP, "c1", {TEST_STREAM: ">"})
    message_id = message_id.decode()
    decoded = {k.decode(): v.decode() for k, v in fields.items()}
    kwargs = {
        "stream": TEST_STREAM,
        "group": TEST_GROUP,
        "consumer": "c1",
        "message_id": message_id,
        "fields": decoded,
        "delivery_count": 3,
        "error_class": "transient",
        "error": "gave up",
    }
    first = dead_letter(client, **kwargs)
    assert first
    assert dead_letter(client, **kwargs) in ("", None)  # no second letter
    letters = cluster.client.xrange(dlq_stream(TEST_STREAM))
    assert [fields["message_id"] for _, fields in letters] == [message_id]
    assert [g["name"] for g in cluster.client.xinfo_groups(dlq_stream(TEST_STREAM))] == [ARCHIVE_GROUP]
    assert pending(cluster.client) == []
    # The scheduled drain reads every dead-letter stream (each in its own slot) without CROSSSLOT.
    assert DlqArchiver(streams=(*DLQ_STREAMS, dlq_stream(TEST_STREAM))).drain() == 1
    assert dlq_archive_drain() == 0
    assert list(DeadLetter.objects.values_list("stream", "message_id")) == [(TEST_STREAM, message_id)]


def test_minid_trimming_and_lag_metrics_on_the_cluster(cluster, transactional_db):
    client = cluster.client
    ids = [client.xadd(STREAM_ITEM_PUBLISH, {"n": str(i)}) for i in range(10)]
    client.xgroup_create(STREAM_ITEM_PUBLISH, "cg:item:publish", id="0")
    client.xreadgroup("cg:item:publish", "c1", {STREAM_ITEM_PUBLISH: ">"}, count=4)
    client.xack(STREAM_ITEM_PUBLISH, "cg:item:publish", *ids[:4])
    minid = trim_stream(client, STREAM_ITEM_PUBLISH, min_age_seconds=0)
    assert minid is not None
    assert [entry_id for entry_id, _ in client.xrange(STREAM_ITEM_PUBLISH)] == ids[4:]  # only what was finished

    figures = poll_lag(client, {STREAM_ITEM_PUBLISH})
    assert figures[STREAM_ITEM_PUBLISH]["groups"]["cg:item:publish"]["lag"] == 6
    assert metrics.LAG.labels(STREAM_ITEM_PUBLISH, "cg:item:publish")._value.get() == 6


def test_a_sigkilled_consumer_is_reclaimed_on_the_cluster(cluster, run_pipeline, test_env, effects):
    client = cluster.client
    slow = []
    for i in range(4):
        fields = envelope(subject=f"s{i}", seq=i, sleep_first=30)
        client.xadd(TEST_STREAM, fields)
        slow.append(fields)
    victim = run_pipeline(*EFFECTS, "--concurrency", "8", env=test_env)
    wait_for(lambda: client.llen("t:started") == 4, 30, message="the victim is inside the handlers")
    victim.signal(signal.SIGKILL)
    assert victim.wait(10) == -signal.SIGKILL
    assert len(pending(client)) == 4 and effects.count() == 0

    rescuer = run_pipeline(*EFFECTS, env=test_env)
    wait_for(lambda: not pending(client) and effects.count() == 4, 40, message="the rescuer finishes")
    rescuer.terminate()
    assert rescuer.wait(20) == 0
    assert Counter(event_id for event_id, *_ in effects.rows()) == Counter({e["id"]: 1 for e in slow})
    assert {pid for *_, pid in effects.rows()} == {rescuer.pid}


def test_a_master_restarted_mid_run_loses_nothing_and_repeats_nothing(cluster, run_pipeline, test_env, effects):
    client = cluster.client
    events = []
    for i in range(40):
        fields = envelope(subject=f"s{i % 8}", seq=i, sleep=0.05)
        client.xadd(TEST_STREAM, fields)
        events.append(fields)
    worker = run_pipeline(*EFFECTS, "--concurrency", "4", env=test_env)
    wait_for(lambda: effects.count() >= 5, 30, message="the run is under way")
    port = client.get_node_from_key(TEST_STREAM).port
    cluster.restart(port)  # SIGKILL the stream's master, start it again from its AOF
    for i in range(40, 60):  # written after the restart, through the same client
        fields = envelope(subject=f"s{i % 8}", seq=i)
        wait_for(lambda f=fields: _try_xadd(client, f), 30, message="the cluster accepts writes again")
        events.append(fields)
    wait_for(lambda: effects.count() >= len(events) and not pending(client), 90, message="everything done")
    worker.terminate()
    assert worker.wait(30) == 0, worker.output()[-4000:]
    assert Counter(event_id for event_id, *_ in effects.rows()) == Counter({e["id"]: 1 for e in events})
    assert client.xlen(TEST_STREAM) == len(events)


def _try_xadd(client, fields) -> bool:
    try:
        client.xadd(TEST_STREAM, fields)
    except Exception:
        time.sleep(0.2)
        return False
    return True
