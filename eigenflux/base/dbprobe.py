"""Whether PostgreSQL answers, asked on a fresh connection outside the process's pool.

Through the pool the question would wait (up to its timeout) for a connection to come back, a pool whose
connections are all lent out says nothing about the server, and an outage would look like "up" once it is
over. The web uses it to tell "the database is down" from "every pooled connection is busy" (both end in the
pool's timeout); the pipeline's circuit breakers to tell an outage from one entry's own failure.
"""

from __future__ import annotations

import threading
import time

from django.db import connection

# PostgreSQL states that mean the server is unreachable or going away, not that a statement failed:
# class 08 (connection exception) and 57P01-57P03 (admin shutdown, crash shutdown, cannot connect now).
OUTAGE_SQLSTATE_PREFIXES = ("08", "57P01", "57P02", "57P03")
_CONNECT_TIMEOUT = 3  # seconds: an answer, or down
_REUSE_SECONDS = 0.5

_lock = threading.Lock()
_last: tuple[float, bool] | None = None  # (monotonic time, answer)


def postgres_answers_directly() -> bool:
    """SELECT 1 on a fresh connection outside the pool. One probe at a time per process, and an answer younger
    than _REUSE_SECONDS is reused: when a pool runs dry, every waiting thread times out together, and each
    opening a connection of its own would overrun the connection budget."""
    global _last
    with _lock:
        if _last is not None and time.monotonic() - _last[0] < _REUSE_SECONDS:
            return _last[1]
        answer = _probe()
        _last = (time.monotonic(), answer)
        return answer


def _probe() -> bool:
    import psycopg

    params = {k: v for k, v in connection.get_connection_params().items() if k not in ("pool", "cursor_factory")}
    params["connect_timeout"] = _CONNECT_TIMEOUT
    try:
        with psycopg.connect(**params, autocommit=True) as conn:
            conn.execute("SELECT 1")
    except psycopg.OperationalError as exc:
        sqlstate = getattr(exc, "sqlstate", None)
        return sqlstate is not None and not sqlstate.startswith(OUTAGE_SQLSTATE_PREFIXES)
    return True
