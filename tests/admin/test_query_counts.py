"""Changelists cost a fixed number of queries, however many rows they show (no N+1)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from items.models import ItemStatus, ModerationDecision
from items.services.blacklist import blacklist_keyword_create
from pipeline.models import DeadLetter, LLMCall
from tests.admin.conftest import item_in
from tests.factories import make_agent

CHANGELISTS = [
    "admin:items_processeditem_changelist",
    "admin:pipeline_deadletter_changelist",
    "admin:pipeline_llmcall_changelist",
    "admin:items_agent_changelist",
    "admin:items_agenttoken_changelist",
    "admin:items_blacklistkeyword_changelist",
]


def populate(n: int) -> None:
    for i in range(n):
        item = item_in(ItemStatus.DISCARDED, reason="content_evaluation", domains=["ai"], summary=f"s{i}")
        ModerationDecision.objects.create(
            item=item, actor="pipeline", stage="safety", verdict="flagged", category="fraud"
        )
        DeadLetter.objects.create(
            stream="stream:item:publish",
            group="cg:item:publish",
            message_id=f"{item.pk}-0",
            subject=str(item.pk),
            error_class="transient",
            failed_at=timezone.now(),
            payload={"data": "x" * 1000},
        )
        LLMCall.objects.create(prompt="safety", model="m", item_id=item.pk, latency_ms=10, outcome="ok")
        make_agent()
        blacklist_keyword_create(keyword=f"word{item.pk}")


def queries(client, name: str) -> int:
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(reverse(name)).status_code == 200
    return len(ctx.captured_queries)


@pytest.mark.parametrize("name", CHANGELISTS)
def test_changelist_queries_do_not_grow_with_rows(mod_client, name):
    populate(2)
    few = queries(mod_client, name)
    populate(25)
    many = queries(mod_client, name)
    assert many == few, f"{name}: {few} queries for 2 rows, {many} for 27"


@pytest.mark.parametrize("name", CHANGELISTS)
def test_changelist_query_bound(mod_client, name, django_assert_max_num_queries):
    populate(30)
    with django_assert_max_num_queries(10):
        mod_client.get(reverse(name))
