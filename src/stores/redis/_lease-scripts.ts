/**
 * The Lua scripts of the Redis store's turn lease: a FIFO line per session kept on the server, a
 * fence per grant, and wake messages naming the next waiter (see `redis/_lease.ts`). Each touches only
 * keys of one session's hash tag, so it runs unchanged on Redis Cluster.
 */
import { script } from "./_scripts.js";

/**
 * Lease scripts take KEYS = lease, queue, alive, qseq, fence. The queue is a sorted set of waiter
 * tokens by ticket number (arrival order at the server); `alive` holds each waiter's heartbeat
 * deadline in server time, so a crashed waiter drops out of line instead of blocking it.
 */
export const LEASE = `
local LEASE, QUEUE, ALIVE, QSEQ, FENCE = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local function housekeeping(ms)
  redis.call('PEXPIRE', QUEUE, ms)
  redis.call('PEXPIRE', ALIVE, ms)
  redis.call('PEXPIRE', QSEQ, ms)
end
`;

/**
 * The lease poll as a Lua function, shared by LEASE_POLL and the turn-open script. ARGV: token, lease
 * ttl, heartbeat grace, queue housekeeping ttl, fence retention. Joins the line if not in it,
 * refreshes this waiter's heartbeat, drops dead waiters, and grants the lease when this waiter is
 * first in line and nobody holds it. Fences are seeded from the server clock in microseconds, so they
 * keep increasing even after the fence key was deleted or expired.
 * `poll()` returns true and the fence when granted, false and the position in line otherwise.
 */
export const POLL = `
local function poll()
  local token = ARGV[1]
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local cutoff = '(' .. string.format('%d', now)
  local dead = redis.call('ZRANGEBYSCORE', ALIVE, '-inf', cutoff)
  if #dead > 0 then
    for i = 1, #dead do redis.call('ZREM', QUEUE, dead[i]) end
    redis.call('ZREMRANGEBYSCORE', ALIVE, '-inf', cutoff)
  end
  if not redis.call('ZSCORE', QUEUE, token) then
    redis.call('ZADD', QUEUE, redis.call('INCR', QSEQ), token)
  end
  local head = redis.call('ZRANGE', QUEUE, 0, 0)[1]
  if head == token and redis.call('EXISTS', LEASE) == 0 then
    redis.call('ZREM', QUEUE, token)
    redis.call('ZREM', ALIVE, token)
    redis.call('SET', LEASE, token, 'PX', ARGV[2])
    local fence = tonumber(redis.call('GET', FENCE) or '0') + 1
    local micros = tonumber(t[1]) * 1000000 + tonumber(t[2])
    if fence < micros then fence = micros end
    redis.call('SET', FENCE, string.format('%d', fence), 'PX', ARGV[5])
    housekeeping(ARGV[4])
    return true, fence
  end
  redis.call('ZADD', ALIVE, now + tonumber(ARGV[3]), token)
  housekeeping(ARGV[4])
  return false, redis.call('ZRANK', QUEUE, token)
end
`;

/** ARGV as {@link POLL}. Returns {1, fence} when granted, {0, position} otherwise. */
export const LEASE_POLL = script(
  "lease-poll",
  `${LEASE}${POLL}
local granted, value = poll()
if granted then return {1, value} end
return {0, value}`,
);

/**
 * ARGV: token. Leaves the line (a waiter that gave up or whose poll failed), and gives back the lease
 * if that poll granted it after all (its reply was lost), so it need not lapse.
 */
export const LEASE_LEAVE = script(
  "lease-leave",
  `${LEASE}
redis.call('ZREM', QUEUE, ARGV[1])
redis.call('ZREM', ALIVE, ARGV[1])
if redis.call('GET', LEASE) == ARGV[1] then redis.call('DEL', LEASE) end
return 1`,
);

/**
 * ARGV: token, lease ttl, fence. The heartbeat of a holder: extends the lease while this token holds
 * it, or takes a lapsed lease back when no other waiter was granted it since (the fence is unchanged).
 * A write that released the lease (`releaseLease`) advanced the fence, so a renew landing after it
 * finds the lease given back, not lapsed. Returns 1 when held, 0 when another holder has it.
 */
export const LEASE_RENEW = script(
  "lease-renew",
  `${LEASE}
local holder = redis.call('GET', LEASE)
if holder == ARGV[1] then
  redis.call('PEXPIRE', LEASE, ARGV[2])
  return 1
end
if not holder and redis.call('GET', FENCE) == ARGV[3] then
  redis.call('SET', LEASE, ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0`,
);

/**
 * Releasing as a Lua function over LEASE and QUEUE: `releaseLease(token, channel)` deletes the lease
 * only if `token` still holds it, and names the waiter now first in line on the session's (sharded)
 * wake channel, so that one waiter polls at once instead of every waiter polling all the time.
 * Returns false when `token` did not hold it, else the next waiter's token or ''.
 */
export const RELEASE = `
local function releaseLease(token, channel)
  if redis.call('GET', LEASE) ~= token then return false end
  redis.call('DEL', LEASE)
  local next = redis.call('ZRANGE', QUEUE, 0, 0)[1]
  if not next then return '' end
  redis.call('SPUBLISH', channel, next)
  return next
end
`;

/**
 * KEYS: lease, queue, alive, qseq, fence, wake channel. ARGV: token. See {@link RELEASE}.
 * Returns {1, next waiter's token or ''} when released, {0} otherwise.
 */
export const LEASE_RELEASE = script(
  "lease-release",
  `${LEASE}${RELEASE}
local next = releaseLease(ARGV[1], KEYS[6])
if not next then return {0} end
return {1, next}`,
);
