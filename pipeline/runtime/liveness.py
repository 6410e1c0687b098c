"""Which consumers are alive, as they say themselves: a small registry in Redis.

Every run_pipeline process reports each of its consumers every few seconds (loops alive or not, breakers,
entries held) with an expiry. The admin's health page lists them; the moderator's requeue of a stuck item
asks whether the consumer holding the item's stream entry is still among them; housekeeping removes from
consumer groups only consumers that are not. A process that dies simply stops reporting and drops out once
its last report expires.
"""

from __future__ import annotations

import json
import time
from typing import Any

import redis

from pipeline.runtime.naming import text

REGISTRY = "eigenflux:runtime:live"  # sorted set: consumer name -> expiry (unix seconds)
DETAILS = "eigenflux:runtime:live:details"  # hash: consumer name -> JSON status
REPORT_EVERY_SECONDS = 2.0
VALID_SECONDS = 15.0


def publish(client: redis.Redis, statuses: list[dict[str, Any]], *, valid_seconds: float = VALID_SECONDS) -> None:
    """Report these consumers alive until now + valid_seconds; forget reports that expired."""
    now = time.time()
    pipe = client.pipeline(transaction=False)
    for status in statuses:
        name = status["consumer"]
        pipe.zadd(REGISTRY, {name: now + valid_seconds})
        pipe.hset(DETAILS, name, json.dumps({**status, "reported_at": now}, separators=(",", ":")))
    pipe.zrangebyscore(REGISTRY, "-inf", now)
    expired = pipe.execute()[-1]
    if expired:
        pipe = client.pipeline(transaction=False)
        pipe.hdel(DETAILS, *expired)
        pipe.zremrangebyscore(REGISTRY, "-inf", now)
        pipe.execute()


def withdraw(client: redis.Redis, names: list[str]) -> None:
    """A consumer that stops cleanly leaves the registry at once."""
    if names:
        pipe = client.pipeline(transaction=False)
        pipe.zrem(REGISTRY, *names)
        pipe.hdel(DETAILS, *names)
        pipe.execute()


def live_consumers(client: redis.Redis) -> list[dict[str, Any]]:
    """The statuses of consumers whose report has not expired, by stream, group and name."""
    names: list[bytes | str] = client.zrangebyscore(REGISTRY, time.time(), "+inf")  # type: ignore[assignment]
    if not names:
        return []
    statuses = []
    for raw in client.hmget(DETAILS, names):
        if raw:
            try:
                statuses.append(json.loads(raw))
            except ValueError:
                continue
    return sorted(statuses, key=lambda s: (s.get("stream", ""), s.get("group", ""), s.get("consumer", "")))


def live_names(client: redis.Redis) -> set[str]:
    names: list[bytes | str] = client.zrangebyscore(REGISTRY, time.time(), "+inf")  # type: ignore[assignment]
    return {text(name) for name in names}


def stuck_breakers(status: dict[str, Any]) -> dict[str, float]:
    """The breakers of a reported consumer that have not closed for its PIPELINE_BREAKER_STUCK_SECONDS:
    dependency -> seconds."""
    limit = status.get("breaker_stuck_seconds")
    ages = status.get("breakers_open_seconds")
    if not isinstance(limit, int | float) or not isinstance(ages, dict):
        return {}
    return {name: float(age) for name, age in ages.items() if isinstance(age, int | float) and age >= limit}


def open_dependencies(statuses: list[dict[str, Any]]) -> dict[str, float]:
    """The dependencies whose circuit breaker is not closed in any of the reported consumers: dependency -> the
    longest it has been open, in seconds."""
    opened: dict[str, float] = {}
    for status in statuses:
        ages = status.get("breakers_open_seconds")
        if not isinstance(ages, dict):
            continue
        for name, age in ages.items():
            if isinstance(age, int | float):
                opened[name] = max(opened.get(name, 0.0), float(age))
    return opened


def stuck_problems(status: dict[str, Any]) -> list[str]:
    """The same, as the problems the health page and the readiness probes name."""
    return [f"{name} breaker open {age:.0f}s" for name, age in sorted(stuck_breakers(status).items())]


def consumer_alive(client: redis.Redis, name: str) -> bool:
    expiry = client.zscore(REGISTRY, name)
    return expiry is not None and expiry > time.time()
