"""Counts a process kind's PostgreSQL connections (pg_stat_activity, by application_name) while a test runs."""

from __future__ import annotations

import threading

import psycopg


def test_db_connect(**extra) -> psycopg.Connection:
    """A connection of the test's own to the test database, outside Django and its pool."""
    from django.db import connection

    params = connection.get_connection_params()
    params.pop("pool", None)
    params["application_name"] = "eigenflux-test"
    return psycopg.connect(**{**params, "autocommit": True, **extra})


test_db_connect.__test__ = False  # a helper, not a test


def count_connections(conn: psycopg.Connection, application_name: str) -> int:
    row = conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s AND datname = current_database()",
        [application_name],
    ).fetchone()
    return int(row[0])


class ConnectionSampler:
    """Samples the connection count of one application_name every `interval` s; `peak` is the highest seen."""

    def __init__(self, application_name: str, interval: float = 0.02):
        self.application_name = application_name
        self.interval = interval
        self.peak = 0
        self.samples = 0
        self._stop = threading.Event()
        self._conn = test_db_connect()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> ConnectionSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        self._conn.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, count_connections(self._conn, self.application_name))
            self.samples += 1
            self._stop.wait(self.interval)
