"""Admin login throttling: after ADMIN_LOGIN_MAX_FAILURES failed sign-ins within ADMIN_LOGIN_WINDOW_SECONDS,
for one username or from one client address, further attempts are refused unchecked until the window ends.

Counters live in Redis (shared by every web process), one fixed window per counter starting at its first
failure. A success clears the username's counter, never the address's (an attacker holding one account must
not be able to reset the counter for the others). Redis being down lets logins through, as the API's rate
limits do, and says so in the log.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass

import redis
from django.conf import settings

from eigenflux.redis import get_redis

log = logging.getLogger(__name__)

# One key per call: the username's and the address's counters live in different Redis Cluster slots.
_FAIL = """
local count = redis.call('INCR', KEYS[1])
if count == 1 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end
return count
"""


@dataclass(frozen=True)
class Lockout:
    seconds: int  # until the attempt may be made again


def _keys(username: str, address: str) -> list[str]:
    # Usernames compare case-insensitively (as people type them) and are hashed to keep the keys short.
    user = hashlib.sha256(username.strip().casefold().encode("utf-8")).hexdigest()[:32]
    return [f"admin-login:fail:user:{user}", f"admin-login:fail:addr:{address or 'unknown'}"]


def login_lockout(*, username: str, address: str) -> Lockout | None:
    """The lockout in force for this username or address, or None when an attempt may be made."""
    limit = settings.ADMIN_LOGIN_MAX_FAILURES
    if limit <= 0:
        return None
    try:
        client = get_redis()
        pipe = client.pipeline(transaction=False)
        for key in _keys(username, address):
            pipe.get(key)
            pipe.ttl(key)
        counts_and_ttls = pipe.execute()
    except redis.RedisError as exc:
        log.warning("admin login throttle not applied (Redis unavailable: %s)", exc.__class__.__name__)
        return None
    waits = [
        max(1, int(ttl))
        for count, ttl in zip(counts_and_ttls[::2], counts_and_ttls[1::2], strict=True)
        if count is not None and int(count) >= limit
    ]
    return Lockout(max(waits)) if waits else None


def login_failed(*, username: str, address: str) -> None:
    if settings.ADMIN_LOGIN_MAX_FAILURES <= 0:
        return
    try:
        client = get_redis()
        for key in _keys(username, address):
            client.eval(_FAIL, 1, key, settings.ADMIN_LOGIN_WINDOW_SECONDS)
    except redis.RedisError as exc:
        log.warning("admin login failure not counted (Redis unavailable: %s)", exc.__class__.__name__)


def login_succeeded(*, username: str) -> None:
    try:
        get_redis().delete(_keys(username, "")[0])
    except redis.RedisError as exc:
        log.warning("admin login counter not cleared (Redis unavailable: %s)", exc.__class__.__name__)
