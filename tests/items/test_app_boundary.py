"""Dependencies point one way: the items app (code and migrations) never depends on the pipeline app, and the
moderators group still gets the pipeline permissions it needs, from the pipeline's own migration."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from django.contrib.auth.models import Group
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.loader import MigrationLoader

ITEMS = Path(__file__).resolve().parents[2] / "items"
PIPELINE_PERMISSIONS = {
    "view_deadletter",
    "change_deadletter",
    "view_llmcall",
    "view_llmcallhourly",
    "view_analyzermodel",
}


def test_no_items_migration_depends_on_the_pipeline():
    graph = MigrationLoader(None, ignore_no_migrations=True).graph
    offending = [
        (name, parent)
        for (app, name), node in graph.nodes.items()
        if app == "items"
        for parent in graph.node_map[(app, name)].parents
        if parent.key[0] == "pipeline"
    ]
    assert offending == []


def test_no_items_module_imports_the_pipeline():
    offending = []
    for path in ITEMS.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offending += [f"{path.relative_to(ITEMS.parent)}: {n}" for n in names if n.split(".")[0] == "pipeline"]
    assert offending == []


def _moderator_pipeline_permissions() -> set[str]:
    group = Group.objects.get(name="moderators")
    return set(group.permissions.filter(content_type__app_label="pipeline").values_list("codename", flat=True))


@pytest.mark.django_db  # RunPython only: PostgreSQL runs it in the test's transaction, rolled back after
def test_the_pipeline_migration_grants_the_moderators_its_permissions_and_takes_them_back():
    assert _moderator_pipeline_permissions() == PIPELINE_PERMISSIONS
    executor = MigrationExecutor(connection)
    executor.migrate([("pipeline", "0003_retention_and_hourly_model_calls")])
    assert _moderator_pipeline_permissions() == {"view_llmcallhourly"}
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())
    assert _moderator_pipeline_permissions() == PIPELINE_PERMISSIONS
