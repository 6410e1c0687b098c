"""Database connections as a bounded resource: Django's native psycopg pool, sized per process kind.

Every thread of a process borrows from one pool and gives the connection back when Django closes it (at the
end of a request; in run_pipeline after each handler and before each model call), so a process never holds
more than the pool's max_size, whatever the number of requests in flight or handler threads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import dj_database_url
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

if TYPE_CHECKING:
    from django.db.backends.postgresql.base import DatabaseWrapper as PostgreSQLWrapper

PIPELINE_APPLICATION_NAME = "eigenflux-pipeline"

# Nothing here imports django.db at module level: settings.py imports db_settings() while settings load.


def db_settings(
    url: str,
    *,
    pool: bool,
    min_size: int,
    max_size: int,
    timeout: float,
    conn_max_age: int,
    application_name: str,
    name: str = "web",
    behind_pooler: bool = False,
) -> dj_database_url.DBConfig:
    """The DATABASES entry for `url`. Pooled connections are never persistent per thread (CONN_MAX_AGE 0:
    Django hands them back to the pool instead of closing them). `application_name` shows in
    pg_stat_activity, so connections can be counted per process kind."""
    config = dj_database_url.parse(url, conn_max_age=0 if pool else conn_max_age, conn_health_checks=True)
    config.setdefault("OPTIONS", {}).setdefault("application_name", application_name)
    if behind_pooler:
        # A transaction-mode pooler (PgBouncer) gives each transaction whichever server connection is free:
        # a named cursor or a prepared statement made in one may not exist in the next. psycopg prepares a
        # query on its 5th run by default; None never prepares. Django declares no cursor WITH HOLD then.
        config["OPTIONS"]["prepare_threshold"] = None
        config["DISABLE_SERVER_SIDE_CURSORS"] = True
    if pool:
        config.setdefault("OPTIONS", {})["pool"] = pool_options(
            min_size=min_size, max_size=max_size, timeout=timeout, name=name
        )
    return config


def pool_options(*, min_size: int, max_size: int, timeout: float, name: str) -> dict:
    return {"min_size": min(min_size, max_size), "max_size": max_size, "timeout": timeout, "name": f"eigenflux-{name}"}


def postgresql_connection() -> PostgreSQLWrapper:
    """This thread's default connection as the PostgreSQL wrapper it is (with its pool); EigenFlux runs on
    PostgreSQL only."""
    from django.db import DEFAULT_DB_ALIAS, connections
    from django.db.backends.postgresql.base import DatabaseWrapper

    wrapper = connections[DEFAULT_DB_ALIAS]
    if not isinstance(wrapper, DatabaseWrapper):
        raise ImproperlyConfigured(f"EigenFlux needs PostgreSQL, not {wrapper.vendor}")
    return wrapper


def use_pipeline_pool() -> None:
    """Switch this process to run_pipeline's pool size, timeout and checks (call before its threads start).

    The pool is created on first use, so a pool already opened (e.g. by a system check) is closed and the
    next connection builds the new one."""
    from django.db import connection, connections

    database = connections["default"].settings_dict
    options = database.setdefault("OPTIONS", {})
    options["application_name"] = PIPELINE_APPLICATION_NAME
    if "pool" not in options:
        return
    # No health check on every checkout: Django's pool check is an empty query, a round trip and a transaction
    # each time a handler takes a connection (after every model call), about five per enriched item. A
    # connection that broke while idle fails its first query instead; the runtime asks PostgreSQL itself
    # (pipeline.runtime.dependencies) whether that was an outage, and the pool drops the broken connection.
    database["CONN_HEALTH_CHECKS"] = False
    options["pool"] = pool_options(
        min_size=settings.DB_POOL_MIN_SIZE,
        max_size=settings.PIPELINE_DB_POOL_MAX_SIZE,
        timeout=settings.PIPELINE_DB_POOL_TIMEOUT,
        name="pipeline",
    )
    connection.close()
    postgresql_connection().close_pool()


def release_connection() -> None:
    """Give this thread's database connection back (to the pool; closed when unpooled) before a long wait
    such as a model call, so the wait does not pin a connection. Inside a transaction it is kept: the
    transaction needs it. The next query takes a connection again."""
    from django.db import DEFAULT_DB_ALIAS, connections

    wrapper = connections[DEFAULT_DB_ALIAS]  # once: `django.db.connection` looks it up again per attribute
    if wrapper.connection is not None and not wrapper.in_atomic_block:
        wrapper.close()


def pool_exhausted(exc: BaseException | None) -> bool:
    """True when `exc` (or what it was raised from) is the pool's timeout: no connection became free in time."""
    from psycopg_pool import PoolTimeout

    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, PoolTimeout):
            return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False


def pool_max_size() -> int | None:
    """This process's pool max_size, or None when unpooled."""
    from django.db import connections

    options = connections["default"].settings_dict.get("OPTIONS", {}).get("pool")
    return options["max_size"] if options else None


def connection_to_spare() -> bool:
    """Whether another thread of this process can take a connection now without waiting for the pool: one is
    idle or the pool can still open one. Unpooled, each thread keeps its own, so True unless CONN_MAX_AGE is 0
    (a connection made and closed per use)."""
    from django.db import DEFAULT_DB_ALIAS, connections

    wrapper = connections[DEFAULT_DB_ALIAS]
    pool = getattr(wrapper, "pool", None)  # psycopg_pool's ConnectionPool when pooled
    if pool is None:
        return wrapper.settings_dict.get("CONN_MAX_AGE") != 0
    stats = pool.get_stats()
    return stats.get("pool_available", 0) > 0 or stats.get("pool_size", 0) < pool.max_size
