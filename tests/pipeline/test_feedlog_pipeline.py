"""The impression log and author milestones through real `run_pipeline` processes: the relay carries a page to
stream:replay:log and cg:replay:log stores it; a cg:item:stats process SIGKILLed in the middle of a milestone
(counter changed, inbox message written, milestone row blocked) leaves nothing, and the reclaimed event
reaches the milestone exactly once."""

from __future__ import annotations

import signal

import pytest

from items.events import ITEM_MILESTONE, STREAM_ITEM_STATS
from items.models import FeedImpression, ItemMilestone, ItemStats, Message, MessageKind, MilestoneRule, OutboxEvent
from pipeline.consumers.item_stats import ItemStatsConsumer
from tests.factories import make_agent, make_completed_item
from tests.items.compat.conftest import CompatClient
from tests.pgstat import test_db_connect
from tests.pipeline.runtime.fixtures import pipeline_env, run_pipeline, wait_for  # noqa: F401 - fixtures

MODULES = "pipeline.consumers.item_stats,pipeline.consumers.replay_log"
ENV = {"PIPELINE_EXTRA_CONSUMER_MODULES": MODULES, "PIPELINE_LEASE_SECONDS": "1.5", "LLM_PROVIDER": "local"}


@pytest.fixture
def one_rule(transactional_db):
    MilestoneRule.objects.all().delete()
    return MilestoneRule.objects.create(kind="consumed", threshold=1, message_template="Delivered {count} time.")


def burst(start, *consumers: str) -> None:
    args = ["--burst", "--no-housekeeping"] + [arg for name in consumers for arg in ("--consumer", name)]
    process = start(*args, env=ENV)
    assert process.wait(120) == 0, process.output()[-4000:]


def test_a_page_travels_the_replay_log_stream_into_the_table(run_pipeline, one_rule, settings):  # noqa: F811
    settings.FEED_RANKING_VERSION = "pipeline-v1"  # the web side writes the event: this process's setting counts
    author, _ = make_agent()
    items = [make_completed_item(author, f"GPU hours, lot {n}.") for n in range(3)]
    _, token = make_agent()
    served = CompatClient(token).get("/items/feed?action=refresh&limit=5")[1]["data"]["items"]
    assert len(served) == 3
    burst(run_pipeline, "replay-log", "item-stats")
    rows = list(
        FeedImpression.objects.order_by("position").values_list("item_id", "position", "feed", "ranking_version")
    )
    assert rows == [(int(i["item_id"]), n, "client", "pipeline-v1") for n, i in enumerate(served, 1)]
    assert {pk for pk, *_ in rows} == {item.pk for item in items}
    assert ItemMilestone.objects.count() == 3  # one per item: each was delivered once
    burst(run_pipeline, "replay-log", "item-stats")  # nothing new: nothing twice
    assert FeedImpression.objects.count() == 3 and ItemMilestone.objects.count() == 3


def _blocked(conn) -> bool:
    row = conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
    ).fetchone()
    return bool(row[0])


# Where the consumer is stopped, by a lock the test holds, before it is killed:
# - "before-commit": the milestone's insert waits on its unique key (the test inserted the same key, uncommitted),
#   after the counter, the consumed-event record and the inbox message were written: the kill leaves nothing.
# - "in-commit": the COMMIT waits (Django's foreign keys are checked at commit, and the milestone's key to its rule
#   needs the rule's row, which the test holds): the transaction commits after the kill, the entry is never
#   acknowledged, and the redelivery must find it done.
HOLD = {
    "before-commit": (
        "INSERT INTO items_itemmilestone (item_id, kind, threshold, reached_at) VALUES (%(item)s, 'consumed', 1, now())"
    ),
    "in-commit": "SELECT id FROM items_milestonerule WHERE id = %(rule)s FOR UPDATE",
}


@pytest.mark.parametrize("where", sorted(HOLD))
def test_a_consumer_killed_in_the_middle_of_a_milestone_reaches_it_once(run_pipeline, one_rule, redis_client, where):  # noqa: F811
    author, _ = make_agent()
    item = make_completed_item(author, summary="Spare GPU hours")
    _, token = make_agent()
    assert CompatClient(token).get("/items/feed?action=refresh&limit=5")[1]["data"]["items"]
    holder = test_db_connect(autocommit=False)
    holder.execute(HOLD[where], {"item": item.pk, "rule": one_rule.pk})
    first = run_pipeline("--consumer", "item-stats", "--no-housekeeping", env=ENV)
    monitor = test_db_connect()
    try:
        wait_for(lambda: _blocked(monitor), 60, interval=0.1, message="the consumer blocked")
        first.signal(signal.SIGKILL)
        assert first.wait(10) == -signal.SIGKILL
    finally:
        holder.rollback()
        holder.close()
        monitor.close()
    pending = lambda: redis_client.xpending_range(STREAM_ITEM_STATS, ItemStatsConsumer.group, "-", "+", 10)  # noqa: E731
    wait_for(lambda: pending() and all(p["time_since_delivered"] > 1600 for p in pending()), 20, message="idle")
    done_before = 1 if where == "in-commit" else 0
    consumed = lambda: ItemStats.objects.filter(item=item).values_list("consumed", flat=True).first() or 0  # noqa: E731
    wait_for(lambda: consumed() == done_before, 10, message="the killed transaction's end")
    assert Message.objects.filter(kind=MessageKind.MILESTONE).count() == done_before
    burst(run_pipeline, "item-stats")
    assert ItemStats.objects.get(item=item).consumed == 1
    assert list(ItemMilestone.objects.values_list("item_id", "kind", "threshold")) == [(item.pk, "consumed", 1)]
    assert list(Message.objects.filter(kind=MessageKind.MILESTONE).values_list("recipient_id", "body")) == [
        (author.pk, "Delivered 1 time.")
    ]
    assert OutboxEvent.objects.filter(event_type=ITEM_MILESTONE).count() == 1
    assert not pending()
