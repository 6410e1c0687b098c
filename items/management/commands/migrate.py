"""`migrate` on DATABASE_DIRECT_URL when it is set: a migration may need a session of its own (SET, advisory
locks, CREATE INDEX CONCURRENTLY), which a transaction-mode pooler does not give. `--database` still wins."""

from __future__ import annotations

from django.conf import settings
from django.core.management.commands.migrate import Command as MigrateCommand


class Command(MigrateCommand):
    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.set_defaults(database="direct" if settings.DATABASE_DIRECT_URL else "default")
