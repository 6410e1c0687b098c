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


FORWARD = [f"ALTER INDEX {name} SET (fastupdate = off)" for name in INDEXES] + [
    f"SELECT gin_clean_pending_list('{name}'::regclass)" for name in INDEXES
]
BACKWARD = [f"ALTER INDEX {name} RESET (fastupdate)" for name in INDEXES]


class Migration(migrations.Migration):
    dependencies = [("items", "0015_outbox_notify_from_publisher")]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunSQL(sql=FORWARD, reverse_sql=BACKWARD)],
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
