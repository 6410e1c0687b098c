"""The item table's HNSW graphs are built with the parameters items/models.py declares (the migration rebuilt
them): the main graph and each per-type graph, whose ef_construction is the smaller one."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.db import connection

from items.models import (
    ITEM_HNSW_EF_CONSTRUCTION,
    ITEM_HNSW_M,
    ITEM_TYPE_HNSW_EF_CONSTRUCTION,
    BroadcastType,
    ProcessedItem,
)

pytestmark = pytest.mark.django_db


def test_each_graph_in_the_database_has_its_declared_build_parameters():
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = %s AND indexdef LIKE '%%USING hnsw%%'",
            [ProcessedItem._meta.db_table],
        )
        definitions = dict(cursor.fetchall())
    expected = {"processed_embedding_hnsw": ITEM_HNSW_EF_CONSTRUCTION}
    expected |= {f"processed_hnsw_{kind}": ITEM_TYPE_HNSW_EF_CONSTRUCTION for kind in BroadcastType.values}
    assert set(definitions) == set(expected)
    for name, ef_construction in expected.items():
        assert f"m='{ITEM_HNSW_M}'" in definitions[name], definitions[name]
        assert f"ef_construction='{ef_construction}'" in definitions[name], definitions[name]
        # Half precision (items.models.graph_key): the graph is over the column cast to halfvec.
        assert f"(embedding)::halfvec({settings.EMBEDDING_DIMENSIONS})" in definitions[name], definitions[name]
        assert "halfvec_cosine_ops" in definitions[name], definitions[name]
    assert ITEM_TYPE_HNSW_EF_CONSTRUCTION < ITEM_HNSW_EF_CONSTRUCTION < 64  # smaller than the graphs they replace
