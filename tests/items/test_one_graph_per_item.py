"""One HNSW graph per item (items.graphs): there is no graph over all items, so every query over all types walks
the four per-type graphs and merges them by distance. These tests hold that such a query still finds the nearest
items whatever their type (the similarity search, which runs before the new item's type is known, an
unfiltered search, a feed walk without a type), that the planner can serve each walk from its type's graph, and
that the migration refuses to leave a completed item in no graph."""

from __future__ import annotations

import importlib
import math
from datetime import timedelta

import pytest
from django.apps import apps as django_apps
from django.db import connection, transaction
from django.utils import timezone

from eigenflux.base.sqlrows import BinaryVector, server_bound_cursor
from items import graphs
from items.feed_ranking import candidates
from items.models import BroadcastType, ItemStatus, ProcessedItem
from items.search import _nearest, semantic_candidates
from items.selectors import most_similar
from tests.factories import make_completed_item, make_item

# Truncated afterwards rather than rolled back: a rolled-back row stays in its graph as a dead entry until a
# vacuum, and pgvector 0.6 counts dead entries among a walk's ef_search candidates, so the unit vectors used here
# would crowd other tests' walks near the same axes.
pytestmark = pytest.mark.django_db(transaction=True)
DIMS = 384


def towards(*weights: float) -> list[float]:
    """A unit vector with the given leading components (the rest zero)."""
    norm = math.sqrt(sum(w * w for w in weights))
    return [w / norm for w in weights] + [0.0] * (DIMS - len(weights))


@pytest.fixture
def one_per_type():
    """An item of each type, each nearest to its own axis; the alert item is the nearest to the query below."""
    return {
        kind: make_completed_item(
            content=f"a {kind} broadcast", embedding=towards(*([0.0] * n), 1.0), broadcast_type=kind
        )
        for n, kind in enumerate(BroadcastType.values)
    }


QUERY = towards(0.1, 0.2, 0.3, 0.9)  # nearest the fourth axis (alert), then info, demand, supply


def test_the_similarity_search_finds_the_nearest_item_of_any_type(one_per_type):
    alert = one_per_type["alert"]
    hit = most_similar(embedding=QUERY, exclude_id=-1)
    assert hit is not None and hit.item_id == alert.pk
    assert hit.cosine == pytest.approx(0.9 / math.sqrt(0.01 + 0.04 + 0.09 + 0.81), abs=1e-5)
    assert most_similar(embedding=QUERY, exclude_id=alert.pk).item_id == one_per_type["info"].pk
    # Only completed items: one held back (a moderator's review) is not a group to join.
    ProcessedItem.objects.filter(pk__in=[one_per_type["alert"].pk, one_per_type["info"].pk]).update(
        status=ItemStatus.REVIEW
    )
    assert most_similar(embedding=QUERY, exclude_id=-1).item_id == one_per_type["demand"].pk


def test_nothing_found_on_an_empty_table():
    make_item()  # pending, no vector
    assert most_similar(embedding=QUERY, exclude_id=-1) is None


def test_an_unfiltered_search_merges_every_type_by_distance(one_per_type):
    order = [one_per_type[kind].pk for kind in ("alert", "info", "demand", "supply")]
    with transaction.atomic():
        assert [pk for pk, _ in _nearest(QUERY, None, None, 3)] == order[:3]
    found = semantic_candidates(embedding=QUERY, min_similarity=-1.0, broadcast_type=None, domain=None, depth=10)
    assert [pk for pk, _ in found] == order
    similarities = [similarity for _, similarity in found]
    assert similarities == sorted(similarities, reverse=True)


def test_a_feed_walk_without_a_type_merges_every_type_by_distance(one_per_type):
    ProcessedItem.objects.filter(pk=one_per_type["info"].pk).update(expire_time=timezone.now() - timedelta(hours=1))
    params = {"walk_0": candidates.vector_text(__import__("numpy").array(QUERY)), "nearest": 2, "now": timezone.now()}
    with connection.cursor() as cursor:
        cursor.execute(candidates._walk_sql(None, 0), params)
        rows = cursor.fetchall()
    # The expired info item is not visible: the two nearest visible are alert, then demand.
    assert [row[0] for row in rows] == [one_per_type["alert"].pk, one_per_type["demand"].pk]


def _plan(sql: str, params) -> str:
    with transaction.atomic(), server_bound_cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")  # a table this small would be read whole otherwise
        cursor.execute("SET LOCAL enable_sort = off")
        cursor.execute("EXPLAIN " + sql, params)
        return "\n".join(row[0] for row in cursor.fetchall())


def test_each_walk_can_use_its_types_graph_on_a_server_bound_statement(one_per_type):
    from items import selectors

    most_similar(embedding=QUERY, exclude_id=-1)  # builds the statement
    plan = _plan(selectors._SIMILAR_SQL, {"vector": BinaryVector(QUERY), "exclude": -1})
    for kind in BroadcastType.values:
        assert f"processed_hnsw_{kind}" in plan, plan
    assert "Seq Scan" not in plan, plan


def test_a_type_outside_the_graphs_is_refused():
    with pytest.raises(ValueError, match="unknown broadcast type"):
        graphs.type_condition("gossip")


def test_the_migration_refuses_a_completed_item_without_a_type():
    migration = importlib.import_module("items.migrations.0029_pg5_one_graph")
    untyped = make_completed_item(embedding=towards(1.0), broadcast_type="")
    with connection.schema_editor() as editor, pytest.raises(RuntimeError, match=str(untyped.pk)):
        migration.every_completed_vector_has_a_type(django_apps, editor)
    ProcessedItem.objects.filter(pk=untyped.pk).update(broadcast_type="info")
    with connection.schema_editor() as editor:
        migration.every_completed_vector_has_a_type(django_apps, editor)
