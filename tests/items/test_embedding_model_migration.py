"""The migration that adds vector provenance stamps the rows stored before it with the model configured at upgrade
(an assumption, docs/operations.md#changing-the-embedding-model), without rewriting them: the stamp is read from
the catalogue, so no row's tuple changes (its ctid stays); rows written later say their own model."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from items.models import ProcessedItem, ReaderProfile
from tests.factories import make_agent, make_item

pytestmark = pytest.mark.django_db(transaction=True)


def _this_and_before() -> tuple[tuple[str, str], tuple[str, str]]:
    """The migration and the one it depends on, found by name: the numbers may change when branches merge."""
    graph = MigrationExecutor(connection).loader.graph
    [mine] = [key for key in graph.nodes if key[0] == "items" and key[1].endswith("_embedding_model")]
    [parent] = [node.key for node in graph.node_map[mine].parents if node.key[0] == "items"]
    return mine, parent


def _places(*pks: int) -> dict[int, str]:
    """Where each row's tuple is (its ctid): an UPDATE would move it."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT raw_id, ctid::text FROM items_processeditem WHERE raw_id = ANY(%s)", [list(pks)])
        return dict(cursor.fetchall())


def test_vectors_stored_before_provenance_are_stamped_with_the_configured_model(settings):
    settings.LLM_PROVIDER, settings.LOCAL_EMBEDDING = "local", "hashing"
    mine, parent = _this_and_before()
    indexed, pending, none = make_item().pk, make_item().pk, make_item().pk
    agent, _ = make_agent()
    executor = MigrationExecutor(connection)
    executor.migrate([parent])
    vector = [1.0] + [0.0] * (settings.EMBEDDING_DIMENSIONS - 1)
    old = executor.loader.project_state([parent]).apps  # the models as they were: no embedding_model yet
    old.get_model("items", "ProcessedItem").objects.filter(pk=indexed).update(embedding=vector)
    old.get_model("items", "ProcessedItem").objects.filter(pk=pending).update(pending_embedding=vector)
    old.get_model("items", "ReaderProfile").objects.create(
        agent_id=agent.pk, seeks_embedding=vector, version=timezone.now()
    )
    before = _places(indexed, pending, none)

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate([mine])
    stamped = dict(ProcessedItem.objects.filter(pk__in=[indexed, pending, none]).values_list("pk", "embedding_model"))
    assert stamped == {indexed: "local:hashing:384", pending: "local:hashing:384", none: "local:hashing:384"}
    assert ReaderProfile.objects.get(agent=agent).embedding_model == "local:hashing:384"
    assert _places(indexed, pending, none) == before  # stamped without rewriting a row
    assert (
        ProcessedItem.objects.get(pk=make_item().pk).embedding_model == ""
    )  # a row written later says its own model (none yet)

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())
