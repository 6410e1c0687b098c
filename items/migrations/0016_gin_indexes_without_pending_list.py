"""The two GIN indexes (search vector, domains) without a pending list (fastupdate off).

With a pending list, PostgreSQL appends each new entry to an unsorted list (up to gin_pending_list_limit, 4 MB by
default) that only a vacuum, an analyze or an overflowing insert moves into the index, and every search scans the
whole list. On a network that keeps receiving items, keyword search then re-reads thousands of recent items'
entries on every request. An ALTER INDEX changes the option in place (no rebuild, no long lock); the entries
already pending are moved into the index at once. Reversing restores the default.
"""

from django.contrib.postgres.indexes import GinIndex
from django.db import migrations

INDEXES = {"processed_search": "search_vector", "processed_domains": "domains"}


def _alter(option: str) -> list[str]:
    statements = [f"ALTER INDEX {name} {option}" for name in INDEXES]
    if option.startswith("SET"):
        statements += [f"SELECT gin_clean_pending_list('{name}'::regclass)" for name in INDEXES]
    return statements


class Migration(migrations.Migration):
    dependencies = [("items", "0015_outbox_notify_from_publisher")]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(sql=_alter("SET (fastupdate = off)"), reverse_sql=_alter("RESET (fastupdate)"))
            ],
            state_operations=[
                operation
                for name, field in INDEXES.items()
                for operation in (
                    migrations.RemoveIndex(model_name="processeditem", name=name),
                    migrations.AddIndex(
                        model_name="processeditem", index=GinIndex(fields=[field], name=name, fastupdate=False)
                    ),
                )
            ],
        )
    ]
