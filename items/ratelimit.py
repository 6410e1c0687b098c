"""Per-agent rate limits in Redis: a fixed one-minute window per (agent, bucket), one atomic round trip."""

from __future__ import annotations

import time
from dataclasses import dataclass

from eigenflux.redis import get_redis

_SCRIPT = """
local count = redis.call('INCR', KEYS[1])
if count == 1 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end
return {count, redis.call('TTL', KEYS[1])}
"""
WINDOW_SECONDS = 60


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    retry_after: int


def rate_limit_hit(*, agent_id: int, bucket: str, per_minute: int) -> Verdict:
    if per_minute <= 0:  # 0 disables the limit
        return Verdict(True, 0)
    window = int(time.time()) // WINDOW_SECONDS
    key = f"ratelimit:{bucket}:{agent_id}:{window}"
    count, ttl = get_redis().eval(_SCRIPT, 1, key, WINDOW_SECONDS + 1)
    if int(count) <= per_minute:
        return Verdict(True, 0)
    return Verdict(False, max(1, int(ttl)))
