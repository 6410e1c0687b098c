"""Rate limits in Redis: a fixed window per (bucket, subject), one atomic round trip. Per-agent API limits use
one-minute windows; login limits (per address, per client IP) use hours."""

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


class RateLimitUnavailable(Exception):
    """Redis could not be asked, and the limit must not be skipped (fail-closed callers)."""


def rate_limit_hit(*, agent_id: int, bucket: str, per_minute: int) -> Verdict:
    # Publishing needs only PostgreSQL: a Redis outage must not take the API down with it (fail open).
    return rate_limit_window(
        bucket=bucket, subject=str(agent_id), limit=per_minute, window_seconds=WINDOW_SECONDS, fail_open=True
    )


def rate_limit_window(*, bucket: str, subject: str, limit: int, window_seconds: int, fail_open: bool) -> Verdict:
    """Count one hit for `subject` in the current window; `limit` <= 0 disables the limit. When Redis is
    unavailable the hit is allowed (fail_open) or RateLimitUnavailable is raised."""
    if limit <= 0:
        return Verdict(True, 0)
    window = int(time.time()) // window_seconds
    key = f"ratelimit:{bucket}:{subject}:{window}"
    try:
        client = get_redis()
        count, ttl = _script(client)(keys=[key], args=[window_seconds + 1], client=client)
    except redis.RedisError as exc:
        if not fail_open:
            raise RateLimitUnavailable(str(exc)) from exc
        log.warning("rate limit not applied (Redis unavailable: %s)", exc.__class__.__name__)
        return Verdict(True, 0)
    if int(count) <= limit:
        return Verdict(True, 0)
    return Verdict(False, max(1, int(ttl)))
