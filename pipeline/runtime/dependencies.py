"""Which dependency a handler used, and which one made it fail: the signals the circuit breakers run on.

While a handler runs, the runtime opens an observation scope on its thread. Queries on Django's connection
report PostgreSQL (through `connection.execute_wrapper`), the model layer reports each remote call attempt
(`report(MODEL, ...)` from pipeline.llm.accounting), and a failure that escapes the handler is classified
by `dependency_of`. A success counts only when the dependency really answered, so a handler that ends
early (an item already completed) never passes for proof that the model endpoint is back.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import redis
from django.db import connection
from django.db import utils as db_utils

from pipeline.runtime.breaker import Verdict

POSTGRESQL = "postgresql"
MODEL = "model"
REDIS = "redis"
DEPENDENCIES = (POSTGRESQL, MODEL, REDIS)

# PostgreSQL states that mean the server is unreachable or going away, not that this statement failed:
# class 08 (connection exception) and 57P01-57P03 (admin shutdown, crash shutdown, cannot connect now).
_PROBE_CONNECT_TIMEOUT = 3  # seconds: an answer, or down
_PG_OUTAGE_PREFIXES = ("08", "57P01", "57P02", "57P03")

_local = threading.local()
_probe_lock = threading.Lock()
_last_probe: tuple[float, bool] | None = None  # (monotonic time, answer)
_PROBE_REUSE_SECONDS = 0.5


@dataclass
class Uses:
    """What one handler run observed: dependency -> monotonic time of its last successful / failed use."""

    ok: dict[str, float] = field(default_factory=dict)
    failed: dict[str, float] = field(default_factory=dict)


def report(dependency: str, ok: bool) -> None:
    """Record one use of a dependency on the current thread's scope (no-op outside a handler)."""
    uses: Uses | None = getattr(_local, "uses", None)
    if uses is not None:
        (uses.ok if ok else uses.failed)[dependency] = time.monotonic()


def _observe_query(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: dict[str, Any]) -> Any:
    try:
        result = execute(sql, params, many, context)
    except db_utils.DatabaseError as exc:
        report(POSTGRESQL, not is_postgres_outage(exc))
        raise
    report(POSTGRESQL, True)
    return result


@contextmanager
def observing() -> Iterator[Uses]:
    """The scope of one handler run on this thread."""
    uses = Uses()
    previous = getattr(_local, "uses", None)
    _local.uses = uses
    try:
        with connection.execute_wrapper(_observe_query):
            yield uses
    finally:
        _local.uses = previous


def is_postgres_outage(exc: BaseException) -> bool:
    """A connection-level failure (server down, unreachable, restarting), not an error of one statement."""
    if isinstance(exc, db_utils.InterfaceError):
        return True
    if not isinstance(exc, db_utils.OperationalError):
        return False
    sqlstate = getattr(exc.__cause__, "sqlstate", None)
    # No SQLSTATE: the client itself could not reach the server (refused, reset, timed out).
    return sqlstate is None or sqlstate.startswith(_PG_OUTAGE_PREFIXES)


def is_redis_outage(exc: BaseException) -> bool:
    return isinstance(exc, redis.ConnectionError | redis.TimeoutError)


def dependency_of(exc: BaseException | None) -> str | None:
    """The dependency whose outage caused `exc` (looking through its causes), or None."""
    from pipeline.llm.errors import ModelUnavailable  # the model layer imports this module's report()

    seen = 0
    while exc is not None and seen < 10:
        named = getattr(exc, "dependency", None)
        if isinstance(named, str) and named in DEPENDENCIES:
            return named
        if isinstance(exc, ModelUnavailable):
            return MODEL
        if is_postgres_outage(exc):
            return POSTGRESQL
        if is_redis_outage(exc):
            return REDIS
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return None


def probe(dependency: str) -> Verdict:
    """Ask the dependency directly, independently of any entry: PostgreSQL a SELECT 1 on a fresh connection
    outside the pool, Redis a PING, the model endpoint a GET /models (which may say it cannot tell:
    pipeline.llm.reachability). The breaker uses it to tell an outage from one entry's own failure (even with
    a single entry in flight) and, once half-open, as the hint that decides whether a trial entry counts."""
    try:
        if dependency == POSTGRESQL:
            return Verdict.UP if _postgres_up() else Verdict.DOWN
        if dependency == REDIS:
            from eigenflux.redis import get_redis

            return Verdict.UP if get_redis().ping() else Verdict.DOWN
        if dependency == MODEL:
            from pipeline.llm.reachability import endpoints_verdict

            return endpoints_verdict()
    except (redis.RedisError, OSError):
        return Verdict.DOWN
    return Verdict.UP


def is_up(dependency: str) -> bool:
    """Not down for everyone, as far as a probe can tell: a failure while the probe cannot tell is the entry's
    own (it counts), never an outage that would pause every entry on a guess."""
    return probe(dependency) is not Verdict.DOWN


def _postgres_up() -> bool:
    if not connection.in_atomic_block:
        with contextlib.suppress(db_utils.DatabaseError):
            connection.close()  # a connection the outage broke is not handed to the next handler
    return postgres_answers_directly()


def postgres_answers_directly() -> bool:
    """SELECT 1 on a fresh connection outside the process's pool. Through the pool the question would wait (up
    to its timeout) for a connection to come back, a pool whose connections are all lent out says nothing about
    the server, and an outage would look like "up" once it is over. One probe at a time per process, and an
    answer younger than _PROBE_REUSE_SECONDS is reused: when a pool runs dry, every waiting handler times out
    together, and each opening a connection of its own would overrun the connection budget."""
    global _last_probe
    with _probe_lock:
        if _last_probe is not None and time.monotonic() - _last_probe[0] < _PROBE_REUSE_SECONDS:
            return _last_probe[1]
        answer = _probe_postgres()
        _last_probe = (time.monotonic(), answer)
        return answer


def _probe_postgres() -> bool:
    import psycopg

    params = {k: v for k, v in connection.get_connection_params().items() if k not in ("pool", "cursor_factory")}
    params["connect_timeout"] = _PROBE_CONNECT_TIMEOUT
    try:
        with psycopg.connect(**params, autocommit=True) as conn:
            conn.execute("SELECT 1")
    except psycopg.OperationalError as exc:
        sqlstate = getattr(exc, "sqlstate", None)
        return sqlstate is not None and not sqlstate.startswith(_PG_OUTAGE_PREFIXES)
    return True
