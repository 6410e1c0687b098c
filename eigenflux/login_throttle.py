"""Admin login throttling: failed sign-ins fill token buckets (items.ratelimit), one per (username, client
address) holding ADMIN_LOGIN_MAX_FAILURES, and higher ceilings per username (from every address) and per
client address (for every username), all refilled over ADMIN_LOGIN_WINDOW_SECONDS. While a bucket is full,
attempts it covers are refused unchecked; so a stranger guessing at a moderator's password locks out only
himself, and it takes many addresses (or many usernames from one) to lock out more.

A success empties its (username, address) bucket, never a ceiling (an attacker holding one account must not
reset the counts for the others). `manage.py clear_login_throttle` lifts a lockout. Redis being down lets logins
through, as the API's rate limits do, and says so in the log.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import redis
from django.conf import settings

from eigenflux.base.clientaddr import client_network
from eigenflux.base.redis import get_redis
from items.ratelimit import Limit, buckets_clear, buckets_hit, key_digest

log = logging.getLogger(__name__)

CLEAR_COMMAND = "manage.py clear_login_throttle [--username U] [--ip IP]"
# What a full bucket locks, for the message.
_LOCKED = {
    "pair": "for this account from this address",
    "username": "for this account",
    "address": "from this address",
}


@dataclass(frozen=True)
class Lockout:
    seconds: int  # until the attempt may be made again
    scope: str  # what is locked, in words ("for this account", ...)


def _user_tag(username: str) -> str:
    # Usernames compare case-insensitively (as people type them); one hash tag per username, so its buckets
    # share a Redis Cluster slot and `clear_login_throttle --username` finds them all.
    return f"admin-login:fail:{{u:{key_digest(username.strip().casefold())}}}"


def _address_key(address: str) -> str:
    return key_digest(client_network(address))


def _limits(username: str, address: str) -> tuple[list[Limit], list[Limit]]:
    """The buckets of one attempt, in two groups of one slot each: the username's, and the address's."""
    window, tag, addr = settings.ADMIN_LOGIN_WINDOW_SECONDS, _user_tag(username), _address_key(address)
    user_limits = [
        Limit("pair", f"{tag}:addr:{addr}", settings.ADMIN_LOGIN_MAX_FAILURES, window),
        Limit("username", f"{tag}:all", settings.ADMIN_LOGIN_MAX_FAILURES_PER_USERNAME, window),
    ]
    per_address = settings.ADMIN_LOGIN_MAX_FAILURES_PER_ADDRESS
    return user_limits, [Limit("address", f"admin-login:fail:addr:{addr}", per_address, window)]


def login_lockout(*, username: str, address: str) -> Lockout | None:
    """The lockout in force for this attempt (the longest, when several are), or None when it may be made."""
    verdicts = [buckets_hit(group, mode="peek", fail_open=True) for group in _limits(username, address)]
    refused = [verdict for verdict in verdicts if not verdict.allowed]
    if not refused:
        return None
    longest = max(refused, key=lambda verdict: verdict.retry_after)
    return Lockout(longest.retry_after, _LOCKED[longest.refused_by])


def login_failed(*, username: str, address: str) -> None:
    for group in _limits(username, address):
        buckets_hit(group, mode="add", fail_open=True)


def login_succeeded(*, username: str, address: str) -> None:
    pair = _limits(username, address)[0][0]
    try:
        buckets_clear([pair.key])
    except redis.RedisError as exc:
        log.warning("admin login counter not cleared (Redis unavailable: %s)", exc.__class__.__name__)


def login_throttle_clear(*, username: str | None = None, address: str | None = None) -> int:
    """Lift the lockouts of a username (all its buckets), of a client address (its ceiling and every
    username's bucket for it), or, with both, of that pair; returns how many buckets were emptied."""
    if not username and not address:
        raise ValueError("name a username, a client address, or both")
    addr = _address_key(address) if address else None
    if username and addr:
        keys = [f"{_user_tag(username)}:addr:{addr}", f"{_user_tag(username)}:all"]
    elif username:
        keys = list(get_redis().scan_iter(match=f"{_user_tag(username)}:*", count=1000))
    else:
        keys = list(get_redis().scan_iter(match=f"admin-login:fail:{{u:*}}:addr:{addr}", count=1000))
    if addr:
        keys.append(f"admin-login:fail:addr:{addr}")
    return buckets_clear(keys)
