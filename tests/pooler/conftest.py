"""The pooler tests: a real PgBouncer (transaction mode) in front of the test database, started per module."""

from __future__ import annotations

import pytest

from tests.pipeline.runtime.fixtures import pipeline_env, run_pipeline  # noqa: F401 - fixtures re-exported
from tests.pooler.servers import PgBouncer


@pytest.fixture(scope="module")
def pgbouncer(django_db_setup, django_db_blocker):
    from django.db import connection

    with django_db_blocker.unblock():
        socket_dir = connection.settings_dict["HOST"]
    if not socket_dir.startswith("/"):
        pytest.fail("the pooler tests put PgBouncer in front of PostgreSQL's unix socket; DATABASE_URL has a host")
    bouncer = PgBouncer(socket_dir=socket_dir)
    try:
        bouncer.start()
        yield bouncer
    finally:
        bouncer.stop()
