"""Lua scripts that make the runtime's ownership-sensitive steps atomic in Redis (docs/delivery.md#runtime).

Ownership = the entry is in the group's pending list under this consumer's name (XPENDING for its id).
"""

from __future__ import annotations

import redis

# Heartbeat: for each id still owned by ARGV[2], reset its idle time without counting a delivery.
# KEYS[1] stream; ARGV: group, consumer, ids... -> the ids no longer owned.
HEARTBEAT = """
local lost = {}
for i = 3, #ARGV do
  local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i], 1)
  if p[1] and p[1][2] == ARGV[2] then
    redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[i], 'JUSTID')
  else
    lost[#lost + 1] = ARGV[i]
  end
end
return lost
"""

# ACK the ids still owned by ARGV[2], in one XACK. KEYS[1] stream; ARGV: group, consumer, ids...
# -> the ids that were not acknowledged (ownership lost).
ACK = """
local owned, lost = {}, {}
for i = 3, #ARGV do
  local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i], 1)
  if p[1] and p[1][2] == ARGV[2] then owned[#owned + 1] = ARGV[i] else lost[#lost + 1] = ARGV[i] end
end
if #owned > 0 then redis.call('XACK', KEYS[1], ARGV[1], unpack(owned)) end
return lost
"""

# Redeliver an owned entry whose retry delay has passed: XCLAIM (counting a delivery) to the same owner.
# KEYS[1] stream; ARGV: group, consumer, id -> {delivery_count, {field, value, ...}} or false when lost;
# {delivery_count, false} when the entry was deleted from the stream.
REDELIVER = """
local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[3], ARGV[3], 1)
if not (p[1] and p[1][2] == ARGV[2]) then return false end
local claimed = redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[3])
local q = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[3], ARGV[3], 1)
local count = (q[1] and q[1][4]) or (p[1][4] + 1)
if claimed[1] and claimed[1][2] then return {count, claimed[1][2]} end
return {count, false}
"""

# Dead-letter: once per (group, id), append to the DLQ stream and ACK, only if ARGV[2] still owns it.
# KEYS[1] origin stream, KEYS[2] dlq stream, KEYS[3] seen index (sorted set: member -> time);
# ARGV: group, consumer, id, now (s), seen ttl (s), archive group, fields...
# -> the DLQ entry id; 0 if already dead-lettered (no second entry); -1 if not owned (nothing written).
# The DLQ stream is created with its archive group, so no letter is ever written that nothing reads; the
# seen index forgets members older than the ttl (an older plain-set index is replaced).
DEAD_LETTER = """
local member = ARGV[1] .. '|' .. ARGV[3]
if redis.call('TYPE', KEYS[3]).ok == 'set' then redis.call('DEL', KEYS[3]) end
if redis.call('ZSCORE', KEYS[3], member) then return 0 end
local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[3], ARGV[3], 1)
if not (p[1] and p[1][2] == ARGV[2]) then return -1 end
redis.pcall('XGROUP', 'CREATE', KEYS[2], ARGV[6], '0', 'MKSTREAM')
local fields = {}
for i = 7, #ARGV do fields[#fields + 1] = ARGV[i] end
local dlq_id = redis.call('XADD', KEYS[2], '*', unpack(fields))
redis.call('ZADD', KEYS[3], ARGV[4], member)
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', tonumber(ARGV[4]) - tonumber(ARGV[5]))
redis.call('XACK', KEYS[1], ARGV[1], ARGV[3])
return dlq_id
"""

# Set the delivery counts of owned entries without delivering them (XCLAIM ... RETRYCOUNT n JUSTID), so that
# a count says how many attempts really started (see pipeline.runtime.deliveries). Also resets their idle time.
# KEYS[1] stream; ARGV: group, consumer, then pairs of id and count -> the ids no longer owned.
SET_COUNT = """
local lost = {}
for i = 3, #ARGV, 2 do
  local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i], 1)
  if p[1] and p[1][2] == ARGV[2] then
    local count = math.max(0, tonumber(ARGV[i + 1]))
    redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[i], 'RETRYCOUNT', count, 'JUSTID')
  else
    lost[#lost + 1] = ARGV[i]
  end
end
return lost
"""

# Remove a consumer from a group only if it has no pending entries (XGROUP DELCONSUMER would drop them).
# KEYS[1] stream; ARGV: group, consumer -> 1 if removed, else 0.
DELETE_IDLE_CONSUMER = """
local p = redis.call('XPENDING', KEYS[1], ARGV[1], '-', '+', 1, ARGV[2])
if #p > 0 then return 0 end
redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], ARGV[2])
return 1
"""

# Outbox relay: XADD an outbox event once. KEYS[1] stream, KEYS[2] once-mark; ARGV: ttl, maxlen (0 = none),
# fields... -> the stream id (the existing one when the mark was already set).
XADD_ONCE = """
local existing = redis.call('GET', KEYS[2])
if existing then return existing end
local fields = {}
for i = 3, #ARGV do fields[#fields + 1] = ARGV[i] end
local id
if tonumber(ARGV[2]) > 0 then
  id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], '*', unpack(fields))
else
  id = redis.call('XADD', KEYS[1], '*', unpack(fields))
end
redis.call('SET', KEYS[2], id, 'EX', ARGV[1])
return id
"""


class Scripts:
    """The scripts registered on one client (EVALSHA, loading on NOSCRIPT)."""

    def __init__(self, client: redis.Redis):
        self.heartbeat = client.register_script(HEARTBEAT)
        self.ack = client.register_script(ACK)
        self.redeliver = client.register_script(REDELIVER)
        self.dead_letter = client.register_script(DEAD_LETTER)
        self.set_count = client.register_script(SET_COUNT)
        self.delete_idle_consumer = client.register_script(DELETE_IDLE_CONSUMER)
        self.xadd_once = client.register_script(XADD_ONCE)
