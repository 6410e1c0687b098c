"""One consumer's seat in its group: the Redis client, the owner-checked scripts, its unique consumer name and
the circuit breakers every part of the runner consults (docs/delivery.md#runtime).

Each part of a runner (scheduling, acking, leases, reading, handling) talks to Redis as this one member, and
reports Redis being away or back through it, so that one breaker decides for all of them.
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from typing import Any

import redis

from pipeline.runtime import dependencies
from pipeline.runtime.breaker import Breakers, State
from pipeline.runtime.naming import text
from pipeline.runtime.scripts import Scripts

log = logging.getLogger(__name__)


def consumer_name(name: str) -> str:
    """Unique per process lifetime, so a restarted process never inherits a dead one's entries by accident."""
    return f"{name}-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def error_text(error: BaseException | None) -> str:
    """An exception as one log-friendly line ("Type: message")."""
    if error is None:
        return ""
    return f"{type(error).__name__}: {error}"


class Membership:
    def __init__(self, client: redis.Redis, *, stream: str, group: str, name: str, breakers: Breakers):
        self.client = client
        self.scripts = Scripts(client)
        self.stream = stream
        self.group = group
        self.name = name
        self.breakers = breakers

    def ensure_group(self, start_id: str) -> None:
        try:
            self.client.xgroup_create(self.stream, self.group, id=start_id, mkstream=True)
        except redis.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    def owns(self, message_id: str) -> bool:
        """Whether the entry is still in the group's pending list under this consumer's name."""
        try:
            pending: list[dict[str, Any]] = self.client.xpending_range(
                self.stream, self.group, message_id, message_id, 1
            )
        except redis.RedisError:
            return False  # cannot prove ownership: do not commit
        return bool(pending) and text(pending[0]["consumer"]) == self.name

    def redis_down(self, exc: BaseException, what: str) -> None:
        log.warning("%s: Redis unavailable (%s): %s", self.name, what, error_text(exc))
        self.breakers.by_name[dependencies.REDIS].trip()

    def redis_up(self) -> None:
        breaker = self.breakers.by_name[dependencies.REDIS]
        if breaker.state is not State.CLOSED:
            breaker.success()
