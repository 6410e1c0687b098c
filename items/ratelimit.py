"""Rate limits in Redis, one atomic round trip each. Per-agent API limits count fixed one-minute windows. Login
limits are token buckets (GCRA: `limit` hits at once, refilled at `limit` per window, on Redis's clock), so
they slide and their Retry-After is the exact wait for the next hit. Failed authentications are counted
per client address and remembered in-process once over the limit, so that a blocked address costs no Redis or
database round trip for the rest of its window."""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

import redis
from django.conf import settings
from redis.commands.core import Script

from eigenflux.base.redis import get_redis

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
    refused_by: str = ""  # the name of the Limit that refused (token buckets)


class RateLimitUnavailable(Exception):
    """Redis could not be asked, and the limit must not be skipped (fail-closed callers)."""


def current_window(window_seconds: int) -> int:
    """The fixed window the present moment falls in (its number since the epoch)."""
    return int(time.time()) // window_seconds


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
    window = current_window(window_seconds)
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


# KEYS: one bucket each; ARGV: each bucket's interval and burst in ms, then the mode. A bucket's value is its
# theoretical arrival time (TAT): a hit is allowed once TAT + interval - burst <= now. "take" spends one hit
# in every bucket only if all allow it, "peek" spends nothing, "add" spends one whatever they say.
_BUCKETS = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local mode = ARGV[#ARGV]
local tats, wait, refused = {}, 0, 0
for i, key in ipairs(KEYS) do
  local interval, burst = tonumber(ARGV[2 * i - 1]), tonumber(ARGV[2 * i])
  local tat = math.max(tonumber(redis.call('GET', key) or now), now)
  tats[i] = tat + interval
  if tats[i] - burst - now > wait then wait, refused = tats[i] - burst - now, i end
end
if mode == 'add' or (mode == 'take' and refused == 0) then
  for i, key in ipairs(KEYS) do redis.call('SET', key, tats[i], 'PX', tats[i] - now) end
end
return {refused, wait}
"""


@dataclass(frozen=True)
class Limit:
    """A token bucket: `limit` hits at once, refilled at `limit` per `window_seconds`; `limit` <= 0 disables it.
    `key` is the whole Redis key; the keys of one call must share a Redis Cluster slot (a `{…}` hash tag)."""

    name: str
    key: str
    limit: int
    window_seconds: int


def buckets_hit(limits: Sequence[Limit], *, mode: str = "take", fail_open: bool) -> Verdict:
    """Ask (and in "take" or "add" mode spend one hit of) every enabled bucket in `limits`, atomically; the
    verdict names the bucket that makes the caller wait longest, and how long. Redis unavailable: allowed
    (fail_open) or RateLimitUnavailable."""
    enabled = [limit for limit in limits if limit.limit > 0]
    if not enabled:
        return Verdict(True, 0)
    args: list[int | str] = []
    for limit in enabled:
        burst = limit.window_seconds * 1000
        args += [max(1, burst // limit.limit), burst]
    try:
        client = get_redis()
        refused, wait = client.eval(_BUCKETS, len(enabled), *(limit.key for limit in enabled), *args, mode)
    except redis.RedisError as exc:
        if not fail_open:
            raise RateLimitUnavailable(str(exc)) from exc
        log.warning("rate limit not applied (Redis unavailable: %s)", exc.__class__.__name__)
        return Verdict(True, 0)
    if int(refused) == 0:
        return Verdict(True, 0)
    return Verdict(False, max(1, -(-int(wait) // 1000)), enabled[int(refused) - 1].name)


def buckets_clear(keys: Sequence[str]) -> int:
    """Empty these buckets (an operator lifting a lockout); returns how many existed."""
    return sum(get_redis().delete(key) for key in keys)


_blocked: dict[str, float] = {}  # client address -> monotonic time its window ends (this process's view)
_blocked_lock = threading.Lock()


def address_blocked_for(address: str) -> int:
    """Seconds until `address` may fail authentication again (0 = not blocked); no round trip."""
    with _blocked_lock:
        until = _blocked.get(address)
        if until is None:
            return 0
        left = until - time.monotonic()
        if left <= 0:
            del _blocked[address]
            return 0
        return max(1, int(left + 0.999))


def key_digest(text: str) -> str:
    """What a rate-limit key carries instead of an address (e-mail, IP, username): never the text itself."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def unauthenticated_hit(*, address: str) -> Verdict:
    """Count one failed authentication from `address`; over the per-minute limit the address is blocked
    (in this process at once, in the others at their next failure from it) until the window ends."""
    per_minute = settings.RATE_LIMIT_UNAUTHENTICATED_PER_MINUTE
    if per_minute <= 0:
        return Verdict(True, 0)
    window = current_window(WINDOW_SECONDS)
    # Hashed: an address may be IPv6 or, from a misconfigured proxy, arbitrary text.
    key = f"ratelimit:unauth:{key_digest(address)}:{window}"
    try:
        client = get_redis()
        count, ttl = _script(client)(keys=[key], args=[WINDOW_SECONDS + 1], client=client)
    except redis.RedisError as exc:
        log.warning("address rate limit not applied (Redis unavailable: %s)", exc.__class__.__name__)
        return Verdict(True, 0)
    if int(count) <= per_minute:
        return Verdict(True, 0)
    retry_after = max(1, int(ttl))
    with _blocked_lock:
        if len(_blocked) > 100_000:  # bounded memory under a flood of addresses
            _blocked.clear()
        _blocked[address] = time.monotonic() + retry_after
    return Verdict(False, retry_after)


def blocked_addresses_clear() -> None:
    with _blocked_lock:
        _blocked.clear()
