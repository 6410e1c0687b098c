"""The item graphs hold their vectors in half precision (items.models.graph_key; tests/items/test_hnsw_params.py
checks each graph's definition): every walk the application sends (semantic search, the feed's candidate walks; the
enrichment's similarity search in tests/pipeline/test_reembed.py) is served by a graph, and the similarities
they report are the column's own, at full precision. On a table this small the planner would sort the rows;
sorting is turned off, which leaves it the graphs or a sequential scan (a walk whose ORDER BY is not the graph's
expression gets the latter)."""

from __future__ import annotations

import numpy as np
import pytest
from django.conf import settings
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from items.feed_ranking.candidates import _nearest_sql
from items.models import BroadcastType
from items.selectors import most_similar
from items.semantic_search import SemanticFilters, _nearest
from tests.factories import make_agent, make_completed_item

pytestmark = pytest.mark.django_db
DIMS = settings.EMBEDDING_DIMENSIONS


@pytest.fixture
def vectors():
    """40 items with random unit vectors, ten of each type; and a query vector."""
    rng = np.random.default_rng(11)
    author, _ = make_agent()
    stored = []
    for n in range(40):
        vector = rng.standard_normal(DIMS)
        vector /= np.linalg.norm(vector)
        kind = BroadcastType.values[n % 4]
        entry = make_completed_item(author, f"item {n}", embedding=vector.tolist(), broadcast_type=kind)
        stored.append((entry.pk, vector))
    query = rng.standard_normal(DIMS)
    return stored, (query / np.linalg.norm(query)).tolist()


def _plan(sql: str, params) -> str:
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_sort = off")
        cursor.execute(f"EXPLAIN {sql}", params)
        return "\n".join(row[0] for row in cursor.fetchall())


def test_a_semantic_walk_is_served_by_the_graphs(vectors):
    _, query = vectors
    for filters, graph in (
        (SemanticFilters(), "processed_embedding_hnsw"),
        (SemanticFilters(broadcast_type="supply"), "processed_hnsw_supply"),
    ):
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL enable_sort = off")
            with CaptureQueriesContext(connection) as captured:
                _nearest(query, filters, 5)
            plan = _plan(captured.captured_queries[-1]["sql"], None)
        assert f"Index Scan using {graph}" in plan, plan


def test_the_feed_walks_are_served_by_the_graphs(vectors):
    _, query = vectors
    params = {"now": timezone.now()}
    parts = _nearest_sql([("demand", np.array(query)), (None, np.array(query))], params)
    assert "Index Scan using processed_hnsw_demand" in _plan(parts[0], params)
    assert "Index Scan using processed_embedding_hnsw" in _plan(parts[1], params)


def test_walks_report_full_precision_similarities_in_their_order(vectors):
    """The graph orders in half precision; what a walk returns is each row's cosine at full precision (what an
    exact search would say), best first. Half precision's own cosines differ from those by more than the check
    allows, so the check would catch a walk that reported the graph's distances."""
    stored, query = vectors
    exact = {pk: float(vector @ np.array(query)) for pk, vector in stored}
    half = {
        pk: float(vector.astype(np.float16).astype(np.float64) @ np.array(query, dtype=np.float16).astype(np.float64))
        for pk, vector in stored
    }
    assert max(abs(exact[pk] - half[pk]) for pk in exact) > 5e-6
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL hnsw.ef_search = 100")
        rows = _nearest(query, SemanticFilters(), 10)
    assert len(rows) == 10
    assert [similarity for _, similarity in rows] == sorted((similarity for _, similarity in rows), reverse=True)
    for pk, similarity in rows:
        assert similarity == pytest.approx(exact[pk], abs=1e-6)
    nearest = most_similar(embedding=query, exclude_id=0)
    assert nearest is not None
    assert nearest.cosine == pytest.approx(exact[nearest.item_id], abs=1e-6)
