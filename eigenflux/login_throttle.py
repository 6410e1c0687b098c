"""Admin login throttling: failed sign-ins fill token buckets (items.ratelimit), one per (username, client
address) holding ADMIN_LOGIN_MAX_FAILURES, and higher ceilings per username (from every address) and per
client address (for every username), all refilled over ADMIN_LOGIN_WINDOW_SECONDS. While a bucket is full,
attempts it covers are refused unchecked; so a stranger guessing at a moderator's password locks out only
himself, and it takes many addresses (or many usernames from one) to lock out more.

The ceilings are for strangers. A moderator who signed in before is known, for ADMIN_LOGIN_TRUST_DAYS, by a
signed device cookie (this browser) or by the client address they signed in from; a known attempt counts only
in its own bucket (per device, or per (username, address)), never against a ceiling, so many addresses failing
at a username cannot lock its moderator out of a browser or a network they have used. Only a moderator on a new
browser and a new network can be held by a full ceiling (docs/threat-model.md).

A success empties its own bucket, never a ceiling (an attacker holding one account must not reset the counts
for the others). `manage.py clear_login_throttle` lifts a lockout. Redis being down lets logins through, as
the API's rate limits do, and says so in the log.
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass

import redis
from django.conf import settings
from django.core import signing

from eigenflux.base.clientaddr import client_network
from eigenflux.base.redis import get_redis
from items.ratelimit import Limit, buckets_clear, buckets_hit, key_digest

log = logging.getLogger(__name__)

CLEAR_COMMAND = "manage.py clear_login_throttle [--username U] [--ip IP]"
# What a full bucket locks, for the message.
_LOCKED = {
    "device": "for this account in this browser",
    "pair": "for this account from this address",
    "username": "for this account",
    "address": "from this address",
}


@dataclass(frozen=True)
class Lockout:
    seconds: int  # until the attempt may be made again
    scope: str  # what is locked, in words ("for this account", ...)


DEVICE_COOKIE = "eigenflux_admin_device"
_DEVICE_SALT = "eigenflux.admin-login-device"


def _user_digest(username: str) -> str:
    # Usernames compare case-insensitively (as people type them).
    return key_digest(username.strip().casefold())


def _user_tag(username: str) -> str:
    # One hash tag per username, so its buckets share a Redis Cluster slot and `clear_login_throttle --username`
    # finds them all.
    return f"admin-login:fail:{{u:{_user_digest(username)}}}"


def _known_key(username: str, address: str) -> str:
    # Outside the `fail` prefix: lifting a lockout does not forget where the moderator signed in from.
    return f"admin-login:known:{{u:{_user_digest(username)}}}:addr:{_address_key(address)}"


def _address_key(address: str) -> str:
    return key_digest(client_network(address))


def _trust_seconds() -> int:
    return settings.ADMIN_LOGIN_TRUST_DAYS * 86_400


def device_cookie_value(username: str) -> str:
    """A new signed device cookie for `username`, set when they sign in: this browser is theirs."""
    payload = {"u": _user_digest(username), "d": secrets.token_hex(16)}
    return signing.dumps(payload, salt=_DEVICE_SALT)


def device_of(cookie: str | None, username: str) -> str | None:
    """The device id a valid, unexpired cookie gives for `username`, or None (no cookie, forged, another
    user's, or older than ADMIN_LOGIN_TRUST_DAYS)."""
    if not cookie:
        return None
    try:
        payload = signing.loads(cookie, salt=_DEVICE_SALT, max_age=_trust_seconds())
    except signing.BadSignature:
        return None
    if not isinstance(payload, dict) or payload.get("u") != _user_digest(username):
        return None
    device = payload.get("d")
    return device if isinstance(device, str) and len(device) == 32 else None


def _known_address(username: str, address: str) -> bool:
    try:
        return bool(get_redis().exists(_known_key(username, address)))
    except redis.RedisError:
        return False  # the buckets fail open too


def _limits(username: str, address: str, device: str | None) -> list[list[Limit]]:
    """The buckets of one attempt, in groups of one slot each: a known device's own; a known address's pair;
    or, for a stranger, the pair and the username's ceiling, and the address's ceiling."""
    window, tag, addr = settings.ADMIN_LOGIN_WINDOW_SECONDS, _user_tag(username), _address_key(address)
    if device:
        return [[Limit("device", f"{tag}:device:{device}", settings.ADMIN_LOGIN_MAX_FAILURES, window)]]
    pair = Limit("pair", f"{tag}:addr:{addr}", settings.ADMIN_LOGIN_MAX_FAILURES, window)
    if _known_address(username, address):
        return [[pair]]
    user_limits = [pair, Limit("username", f"{tag}:all", settings.ADMIN_LOGIN_MAX_FAILURES_PER_USERNAME, window)]
    per_address = settings.ADMIN_LOGIN_MAX_FAILURES_PER_ADDRESS
    return [user_limits, [Limit("address", f"admin-login:fail:addr:{addr}", per_address, window)]]


def login_lockout(*, username: str, address: str, device: str | None = None) -> Lockout | None:
    """The lockout in force for this attempt (the longest, when several are), or None when it may be made."""
    verdicts = [buckets_hit(group, mode="peek", fail_open=True) for group in _limits(username, address, device)]
    refused = [verdict for verdict in verdicts if not verdict.allowed]
    if not refused:
        return None
    longest = max(refused, key=lambda verdict: verdict.retry_after)
    return Lockout(longest.retry_after, _LOCKED[longest.refused_by])


def login_failed(*, username: str, address: str, device: str | None = None) -> None:
    for group in _limits(username, address, device):
        buckets_hit(group, mode="add", fail_open=True)


def login_succeeded(*, username: str, address: str, device: str | None = None) -> None:
    """Empty the attempt's own bucket, and remember the address as known for the username."""
    own = _limits(username, address, device)[0][0]
    try:
        buckets_clear([own.key])
        get_redis().set(_known_key(username, address), 1, ex=_trust_seconds())
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
