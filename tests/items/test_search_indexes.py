"""The GIN indexes that keyword search and domain filters read keep no pending list: a new item's entries go
into the index itself, so no search scans a list of recent entries. Migration items.0016 turns the list off
(moving what it held into the index) and reverses to PostgreSQL's default."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from tests.factories import make_completed_item

pytestmark = pytest.mark.django_db

GIN_INDEXES = ("processed_search", "processed_domains")


def pending_pages(index: str) -> int:
    """Pages of the index's pending list (gin_clean_pending_list moves them into the index and counts them)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT gin_clean_pending_list(%s::regclass)", [index])
        return cursor.fetchone()[0]


MIGRATION = ("items", "0016_gin_indexes_without_pending_list")


def run_migration(*, backwards: bool = False) -> None:
    """Apply or reverse migration 0016 alone (its own operations, as `migrate` runs them), leaving the later
    migrations' tables in place: the items the test writes need today's schema."""
    loader = MigrationExecutor(connection).loader
    migration = loader.get_migration(*MIGRATION)
    with connection.schema_editor(atomic=migration.atomic) as editor:
        if backwards:
            migration.unapply(loader.project_state(MIGRATION, at_end=True), editor)
        else:
            migration.apply(loader.project_state(MIGRATION, at_end=False), editor)


def test_a_new_item_leaves_nothing_pending_in_the_gin_indexes():
    make_completed_item(content="Spare A100 GPUs in Frankfurt, hourly.", domains=["compute", "cloud"])
    assert {index: pending_pages(index) for index in GIN_INDEXES} == dict.fromkeys(GIN_INDEXES, 0)


def test_the_migration_turns_the_pending_list_off_moves_what_it_held_and_reverses():
    run_migration(backwards=True)
    try:
        make_completed_item(content="Reversed: PostgreSQL's default pending list is back.")
        assert all(pending_pages(index) >= 1 for index in GIN_INDEXES), "reversed: new entries wait in the list"
        make_completed_item(content="Written while the list was on, moved into the index by the migration.")
    finally:
        run_migration()
    # gin_clean_pending_list would have found the second item's entries had the migration not moved them.
    assert {index: pending_pages(index) for index in GIN_INDEXES} == dict.fromkeys(GIN_INDEXES, 0)
    make_completed_item(content="Written after the migration.")
    assert {index: pending_pages(index) for index in GIN_INDEXES} == dict.fromkeys(GIN_INDEXES, 0)
