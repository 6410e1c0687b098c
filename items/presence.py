"""Which agents have a WebSocket open (docs/feed.md#match-push): a presence registry in Redis, one round trip per
connection event, so that a match push looks only at agents who can receive it.

`{presence}:agents` is a sorted set of agent ids scored by their latest heartbeat (Redis's clock, in ms);
`{presence}:agent:<id>` holds that agent's open sockets (channel names, scored the same way), so that closing
one of two sockets leaves the agent online. A socket heartbeats when it connects and at every token re-check
(WS_AUTH_RECHECK_SECONDS); an agent whose latest heartbeat is older than WS_PRESENCE_STALE_SECONDS (a process
killed without closing its sockets) counts as offline, and stale entries are pruned as sockets come and go. The
same set bounds an agent's open sockets (presence_claim, WS_MAX_SOCKETS_PER_AGENT).
All keys share the `{presence}` hash tag (one Redis Cluster slot), so each event is one atomic script.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.conf import settings
from redis.commands.core import Script

from eigenflux.base.redis import get_redis

AGENTS_KEY = "{presence}:agents"
SOCKETS_PREFIX = "{presence}:agent:"

# KEYS: the agents set, the agent's sockets set; ARGV: agent id, channel name, stale window in ms, up|down.
_EVENT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local stale = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - stale)
if ARGV[4] == 'up' then
  redis.call('ZADD', KEYS[2], now, ARGV[2])
  redis.call('PEXPIRE', KEYS[2], stale)
  redis.call('ZADD', KEYS[1], now, ARGV[1])
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - stale)
else
  redis.call('ZREM', KEYS[2], ARGV[2])
  if redis.call('ZCARD', KEYS[2]) == 0 then redis.call('ZREM', KEYS[1], ARGV[1]) end
end
return now
"""

# KEYS: the agents set, the agent's sockets set; ARGV: agent id, channel name, stale window in ms, the limit.
# Registers the socket (as 'up' does) only while the agent has fewer than `limit` others open; returns 1 if so.
_CLAIM = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local stale, limit = tonumber(ARGV[3]), tonumber(ARGV[4])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - stale)
if limit > 0 and not redis.call('ZSCORE', KEYS[2], ARGV[2]) and redis.call('ZCARD', KEYS[2]) >= limit then
  return 0
end
redis.call('ZADD', KEYS[2], now, ARGV[2])
redis.call('PEXPIRE', KEYS[2], stale)
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - stale)
return 1
"""

# KEYS: the agents set; ARGV: the stale window in ms, then the agent ids asked about. Returns those online.
_ONLINE = """
local t = redis.call('TIME')
local since = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) - tonumber(ARGV[1])
local online = {}
for i = 2, #ARGV do
  local score = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if score and tonumber(score) >= since then online[#online + 1] = ARGV[i] end
end
return online
"""

# KEYS: the agents set; ARGV: the stale window in ms. Returns how many agents are online.
_ANY = """
local t = redis.call('TIME')
local since = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) - tonumber(ARGV[1])
return redis.call('ZCOUNT', KEYS[1], since, '+inf')
"""

_scripts: dict[str, Script] = {}


def _run(name: str, source: str, *, keys: list[str], args: list) -> Any:
    client = get_redis()
    if name not in _scripts:
        _scripts[name] = client.register_script(source)
    return _scripts[name](keys=keys, args=args, client=client)


def _stale_ms() -> int:
    return int(settings.WS_PRESENCE_STALE_SECONDS * 1000)


def presence_heartbeat(*, agent_id: int, channel: str) -> None:
    """A socket of this agent is open (on connect and at every re-check)."""
    _run("event", _EVENT, keys=[AGENTS_KEY, f"{SOCKETS_PREFIX}{agent_id}"], args=[agent_id, channel, _stale_ms(), "up"])


def presence_claim(*, agent_id: int, channel: str, limit: int) -> bool:
    """Register a new socket of this agent, unless it already has `limit` open (WS_MAX_SOCKETS_PER_AGENT; 0 means
    no limit): one atomic script, so sockets opened at once in several processes cannot all slip under it. A
    socket of a process killed without closing it counts until WS_PRESENCE_STALE_SECONDS have passed."""
    keys = [AGENTS_KEY, f"{SOCKETS_PREFIX}{agent_id}"]
    return bool(_run("claim", _CLAIM, keys=keys, args=[agent_id, channel, _stale_ms(), limit]))


def presence_leave(*, agent_id: int, channel: str) -> None:
    """A socket of this agent closed; the agent stays online while it has another."""
    _run(
        "event", _EVENT, keys=[AGENTS_KEY, f"{SOCKETS_PREFIX}{agent_id}"], args=[agent_id, channel, _stale_ms(), "down"]
    )


def online_among(agent_ids: Iterable[int]) -> set[int]:
    """The agents of `agent_ids` with a socket open (a heartbeat within WS_PRESENCE_STALE_SECONDS)."""
    ids = [int(pk) for pk in agent_ids]
    if not ids:
        return set()
    found = _run("online", _ONLINE, keys=[AGENTS_KEY], args=[_stale_ms(), *ids])
    return {int(pk) for pk in found or ()}


def anyone_online() -> bool:
    """Whether any agent has a socket open: one round trip, so that a match push with nobody to push to costs
    no search for candidates."""
    return bool(_run("any", _ANY, keys=[AGENTS_KEY], args=[_stale_ms()]))
