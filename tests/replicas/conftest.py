"""The replica tests: a real streaming replica of the test database (tests.replicas.servers), started once per
module; `replica_db` adds it to DATABASES as `replica1` for one test, as DATABASE_REPLICA_URLS would."""

from __future__ import annotations

import time
import warnings

import psycopg
import pytest
from django.db import connection, connections

from eigenflux.base.dbpool import db_settings
from tests.replicas.servers import StreamingReplica


@pytest.fixture(scope="module")
def streaming_replica(django_db_setup, django_db_blocker):
    with django_db_blocker.unblock():
        socket_dir = connection.settings_dict["HOST"]
    if not socket_dir.startswith("/"):
        pytest.fail("the replica tests take a base backup over PostgreSQL's unix socket; DATABASE_URL has a host")
    replica = StreamingReplica(primary_socket_dir=socket_dir)
    try:
        replica.start()
        yield replica
    finally:
        replica.stop()


@pytest.fixture
def replica_db(transactional_db, streaming_replica, settings):
    config = db_settings(
        streaming_replica.url(connection.settings_dict["NAME"]),
        pool=False,
        min_size=0,
        max_size=1,
        timeout=5,
        conn_max_age=0,
        application_name="eigenflux-web",
    )
    original = settings.DATABASES
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Overriding setting DATABASES": the connection is made below
        settings.DATABASES = {**original, "replica1": config}  # what the router picks replicas from
    # The connection itself is handed to the handler, which keeps its own copy of DATABASES without it:
    # Django's test isolation then treats it as a connection the test made (allowed, never flushed).
    wrapper_class = connections["default"].__class__
    configured = connections.configure_settings({"default": {}, "replica1": config})["replica1"]
    connections["replica1"] = wrapper_class(configured, "replica1")
    try:
        yield streaming_replica
    finally:
        connections["replica1"].close()
        del connections["replica1"]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            settings.DATABASES = original


def caught_up(replica: StreamingReplica, timeout: float = 20) -> None:
    """Wait until the replica has replayed everything the primary has written so far."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_current_wal_lsn()::text")
        target = cursor.fetchone()[0]
    deadline = time.monotonic() + timeout
    with psycopg.connect(replica.url("postgres"), autocommit=True) as conn:
        while not conn.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", [target]).fetchone()[0]:
            if time.monotonic() > deadline:
                pytest.fail("the replica did not catch up")
            time.sleep(0.05)
