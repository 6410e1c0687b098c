"""Which dependency a handler used, and which one made it fail: the signals the circuit breakers run on.

While a handler runs, the runtime opens an observation scope on its thread. Queries on Django's connection
report PostgreSQL (through `connection.execute_wrapper`), other layers report their own dependencies (the model
layer each remote call attempt: `report("model", ...)` from pipeline.llm.accounting), and a failure that escapes
the handler is classified by `dependency_of`: a connection-level PostgreSQL or Redis error, or an exception that
names its dependency in a `dependency` attribute. PostgreSQL and Redis are the engine's own; a layer adds its
dependency with `register_probe(name, probe)` (the model layer's GET /models), and gets a breaker for it.
A success counts only when the dependency really answered, so a handler that ends early (an item already
completed) never passes for proof that the model endpoint is back.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import redis
from django.db import connection
from django.db import utils as db_utils

from eigenflux.base.dbprobe import OUTAGE_SQLSTATE_PREFIXES, postgres_answers_directly
from eigenflux.base.redis import get_redis
from pipeline.runtime.breaker import Verdict

log = logging.getLogger(__name__)

POSTGRESQL = "postgresql"
REDIS = "redis"

_local = threading.local()
_probes: dict[str, Callable[[], Verdict]] = {}


def register_probe(name: str, probe: Callable[[], Verdict]) -> None:
    """Add a dependency the breakers watch, with the probe that asks it directly (UP, DOWN or UNKNOWN when it
    cannot tell). Called by the layer that owns the dependency, before the consumers start."""
    if name in (POSTGRESQL, REDIS):
        raise ValueError(f"{name} is the engine's own dependency")
    _probes[name] = probe


def names() -> tuple[str, ...]:
    """Every dependency a breaker watches: the engine's own and the registered ones."""
    return (POSTGRESQL, *_probes, REDIS)


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
    return sqlstate is None or sqlstate.startswith(OUTAGE_SQLSTATE_PREFIXES)


def is_redis_outage(exc: BaseException) -> bool:
    return isinstance(exc, redis.ConnectionError | redis.TimeoutError)


def dependency_of(exc: BaseException | None) -> str | None:
    """The dependency whose outage caused `exc` (looking through its causes), or None."""
    seen = 0
    known = names()
    while exc is not None and seen < 10:
        named = getattr(exc, "dependency", None)
        if isinstance(named, str) and named in known:
            return named
        if is_postgres_outage(exc):
            return POSTGRESQL
        if is_redis_outage(exc):
            return REDIS
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return None


def probe(dependency: str) -> Verdict:
    """Ask the dependency directly, independently of any entry: PostgreSQL a SELECT 1 on a fresh connection
    outside the pool, Redis a PING, a registered one its own probe (the model endpoint's GET /models, which
    may say it cannot tell: pipeline.llm.reachability). The breaker uses it to tell an outage from one entry's
    own failure (even with a single entry in flight) and, once half-open, as the hint that decides whether a
    trial entry counts."""
    try:
        if dependency == POSTGRESQL:
            return Verdict.UP if _postgres_up() else Verdict.DOWN
        if dependency == REDIS:
            return Verdict.UP if get_redis().ping() else Verdict.DOWN
        if dependency in _probes:
            return _probes[dependency]()
    except (redis.RedisError, OSError):
        return Verdict.DOWN
    except Exception:  # a probe that breaks must not stall the breaker waiting for its hint
        log.exception("probing %s failed; its verdict is unknown", dependency)
        return Verdict.UNKNOWN
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
