"""The connection pool's helpers: giving a connection back, model calls that do so, the budget check."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection, transaction

from eigenflux.base import checks
from eigenflux.base.dbpool import pool_exhausted, release_connection


def test_release_hands_the_connection_back_to_the_pool_but_never_inside_a_transaction(transactional_db):
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    assert connection.pool is not None  # the tests run pooled, like the product
    held = connection.connection
    release_connection()
    assert connection.connection is None
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        release_connection()
        assert connection.connection is not None  # the transaction still needs it
    assert held is not None


def test_a_model_call_does_not_pin_a_database_connection(transactional_db, fake_llm):
    from pipeline import llm

    fake_llm.server.latency = 1.0
    connection.close()
    seen = {}

    def worker():
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        seen["held_before"] = connection.connection is not None
        llm.embed(["a slow embedding"])
        connection.close()

    thread = threading.Thread(target=worker)
    thread.start()
    time.sleep(0.5)  # the worker is inside the model call now
    stats = connection.pool.get_stats()
    thread.join(10)
    assert seen["held_before"]
    assert stats["pool_available"] == stats["pool_size"], stats  # nobody holds a connection during the call


def test_pool_exhausted_recognises_the_pool_timeout_behind_djangos_error():
    from django.db import OperationalError
    from psycopg_pool import PoolTimeout

    try:
        raise OperationalError("couldn't get a connection") from PoolTimeout("couldn't get a connection")
    except OperationalError as exc:
        wrapped = exc
    assert pool_exhausted(wrapped)
    assert not pool_exhausted(OperationalError("connection refused"))
    assert not pool_exhausted(None)


def test_check_warns_when_the_budget_exceeds_max_connections(db, settings):
    limit = checks.server_max_connections()
    assert checks.check_connection_budget() == []  # the defaults fit the embedded server
    settings.WEB_PROCESSES = limit // settings.DB_POOL_MAX_SIZE + 1
    (warning,) = checks.check_connection_budget()
    assert warning.id == "eigenflux.W001"
    assert f"max_connections ({limit})" in warning.msg
    assert f"{settings.WEB_PROCESSES} web x {settings.DB_POOL_MAX_SIZE}" in warning.msg


def test_check_is_silent_when_unpooled(db, settings):
    settings.DB_POOL = False
    settings.WEB_PROCESSES = 10_000
    assert checks.check_connection_budget() == []


@pytest.mark.parametrize("processes", [0, 1])
def test_budget_adds_every_process_kind(settings, processes):
    settings.WEB_PROCESSES, settings.PIPELINE_PROCESSES, settings.JOB_WORKERS = 3, processes, 2
    settings.DB_POOL_MAX_SIZE, settings.PIPELINE_DB_POOL_MAX_SIZE, settings.DB_RESERVED_CONNECTIONS = 10, 8, 5
    assert checks.connection_budget().total == 30 + processes * 9 + 4 + 5


def test_pages_outside_the_api_answer_503_json_when_no_connection_is_free(rf):
    from django.db import OperationalError
    from psycopg_pool import PoolTimeout

    from eigenflux.middleware import DatabaseUnavailableMiddleware

    middleware = DatabaseUnavailableMiddleware(lambda request: None)
    try:
        raise OperationalError("couldn't get a connection") from PoolTimeout("couldn't get a connection")
    except OperationalError as exc:
        response = middleware.process_exception(rf.get("/admin/"), exc)
    assert response.status_code == 503
    assert response["Retry-After"] == "1"
    assert middleware.process_exception(rf.get("/admin/"), ValueError("not ours")) is None
