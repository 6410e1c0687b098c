"""Read replicas: DATABASE_REPLICA_URLS adds `replica1`..`replicaN` to DATABASES, and ReplicaRouter sends some
reads there — only inside `replica_reads()`, which the agent API's feed, search and item views open. Every
other read, every write and every read inside a transaction on the primary's connection stays on the primary
(`default`), so the admin, the pipeline and the services never see a replica. (Keyword search opens a read-only
transaction on the replica's own connection for its settings: items.keyword_search.)

Read-your-writes: a write request of an agent (any non-GET call of the agent API) pins that agent to the
primary for DATABASE_REPLICA_PIN_SECONDS, in Redis so that every web process knows it (no cookie). Inside
that window its feed and searches read the primary; so does reading an item of its own, and an item a
replica does not have yet is looked for on the primary before the answer is 404.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import redis
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections

from eigenflux.base.redis import get_redis

log = logging.getLogger(__name__)

REPLICA_PREFIX = "replica"
_replica: ContextVar[str | None] = ContextVar("eigenflux_replica", default=None)


def replica_aliases() -> list[str]:
    return [alias for alias in settings.DATABASES if alias.startswith(REPLICA_PREFIX)]


def _pin_key(agent_id: int) -> str:
    return f"db:primary-pin:{agent_id}"


def pin_to_primary(agent_id: int) -> None:
    """The agent is writing: its reads go to the primary for the next DATABASE_REPLICA_PIN_SECONDS."""
    if not replica_aliases():
        return
    try:
        get_redis().set(_pin_key(agent_id), "1", ex=max(1, settings.DATABASE_REPLICA_PIN_SECONDS))
    except redis.RedisError as exc:
        log.warning("read-your-writes pin not stored (Redis unavailable: %s)", exc.__class__.__name__)


def pinned_to_primary(agent_id: int) -> bool:
    try:
        return bool(get_redis().exists(_pin_key(agent_id)))
    except redis.RedisError:
        return True  # without the pin's memory, the primary is the safe answer


@contextmanager
def replica_reads(agent_id: int | None = None) -> Iterator[str | None]:
    """Reads in this block (outside transactions) go to one replica, unless `agent_id` is pinned to the primary
    or there is no replica; yields the replica's alias or None."""
    aliases = replica_aliases()
    alias = random.choice(aliases) if aliases and not (agent_id and pinned_to_primary(agent_id)) else None
    token = _replica.set(alias)
    try:
        yield alias
    finally:
        _replica.reset(token)


@contextmanager
def primary_reads() -> Iterator[None]:
    """Reads in this block go to the primary even inside replica_reads()."""
    token = _replica.set(None)
    try:
        yield
    finally:
        _replica.reset(token)


class ReplicaRouter:
    def db_for_read(self, model, **hints):
        alias = _replica.get()
        if alias is None or connections[DEFAULT_DB_ALIAS].in_atomic_block:
            return DEFAULT_DB_ALIAS
        return alias

    def db_for_write(self, model, **hints):
        return DEFAULT_DB_ALIAS  # also for an instance read from a replica: replicas are never written

    def allow_relation(self, obj1, obj2, **hints):
        return True  # the replicas hold the same rows as the primary

    def allow_migrate(self, db, app_label, model_name=None, **hints):
        return not db.startswith(REPLICA_PREFIX)
