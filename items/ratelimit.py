"""Per-agent rate limits in Redis: a fixed one-minute window per (agent, bucket), one atomic round trip."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import redis
from redis.commands.core import Script

from eigenflux.redis import get_redis

log = logging.getLogger(__name__)

_SCRIPT = """
local count = redis.call('INCR', KEYS[1])
if count == 1 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end
return {count, redis.call('TTL', KEYS[1])}
"""
WINDOW_SECONDS = 60
_registered: Script | None = None


def _script(client: redis.Redis) -> Script:
    """The script, sent once and then called by its SHA (EVALSHA): this runs on every API request."""
    global _registered
    if _registered is None:
        _registered = client.register_script(_SCRIPT)
    return _registered


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    retry_after: int


def rate_limit_hit(*, agent_id: int, bucket: str, per_minute: int) -> Verdict:
    if per_minute <= 0:  # 0 disables the limit
        return Verdict(True, 0)
    window = int(time.time()) // WINDOW_SECONDS
    key = f"ratelimit:{bucket}:{agent_id}:{window}"
    try:
        client = get_redis()
        count, ttl = _script(client)(keys=[key], args=[WINDOW_SECONDS + 1], client=client)
    except redis.RedisError as exc:
        # Publishing needs only PostgreSQL: a Redis outage must not take the API down with it.
        log.warning("rate limit not applied (Redis unavailable: %s)", exc.__class__.__name__)
        return Verdict(True, 0)
    if int(count) <= per_minute:
        return Verdict(True, 0)
    return Verdict(False, max(1, int(ttl)))
