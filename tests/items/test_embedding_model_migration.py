"""The migration that stamps vectors stored before provenance existed: each gets the model configured at upgrade
(an assumption, docs/operations.md#changing-the-embedding-model); rows without a vector stay unstamped."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from items.models import ProcessedItem, ReaderProfile
from tests.factories import make_agent, make_item

pytestmark = pytest.mark.django_db(transaction=True)


def _this_and_before() -> tuple[tuple[str, str], tuple[str, str]]:
    """The backfill and the migration it depends on, found by name: the numbers may change when branches merge."""
    graph = MigrationExecutor(connection).loader.graph
    [mine] = [key for key in graph.nodes if key[0] == "items" and key[1].endswith("_embedding_model_backfill")]
    [parent] = [node.key for node in graph.node_map[mine].parents if node.key[0] == "items"]
    return mine, parent


def test_vectors_stored_before_provenance_are_stamped_with_the_configured_model(settings):
    settings.LLM_PROVIDER, settings.LOCAL_EMBEDDING = "local", "hashing"
    mine, parent = _this_and_before()
    indexed, pending, none = make_item().pk, make_item().pk, make_item().pk
    agent, _ = make_agent()
    executor = MigrationExecutor(connection)
    executor.migrate([parent])
    vector = [1.0] + [0.0] * (settings.EMBEDDING_DIMENSIONS - 1)
    ProcessedItem.objects.filter(pk=indexed).update(embedding=vector, embedding_model="")
    ProcessedItem.objects.filter(pk=pending).update(pending_embedding=vector, embedding_model="")
    ReaderProfile.objects.create(agent=agent, seeks_embedding=vector, version=timezone.now())

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate([mine])
    stamped = dict(ProcessedItem.objects.filter(pk__in=[indexed, pending, none]).values_list("pk", "embedding_model"))
    assert stamped == {indexed: "local:hashing:384", pending: "local:hashing:384", none: ""}
    assert ReaderProfile.objects.get(agent=agent).embedding_model == "local:hashing:384"

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())
