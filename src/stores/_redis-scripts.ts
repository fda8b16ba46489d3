/**
 * The Lua scripts of the Redis store. Every write to a session runs as one script, so seq assignment,
 * append, cap trimming, fence check and TTL refresh happen in one atomic step. A script touches only
 * keys of one session (one hash tag) or one index key, so each runs unchanged on Redis Cluster.
 *
 * Numbers meant for string building go through `string.format('%d', …)`: Lua 5.1's `tostring` turns
 * large integers into `1.7e+15`. Numbers passed to `redis.call` are converted exactly by Redis.
 */
import { createHash } from "node:crypto";

/** A script with its SHA1, run with EVALSHA (falling back to EVAL when the server lacks it). */
export interface RedisScript {
  readonly name: string;
  readonly lua: string;
  readonly sha: string;
}

/** A script of `lua`, with its SHA1. */
export function script(name: string, lua: string): RedisScript {
  return { name, lua, sha: createHash("sha1").update(lua).digest("hex") };
}

/**
 * Session data scripts take KEYS = meta, msgs, sums, state, fence, ops, opsq, branches. Expiry: the data
 * keys of a session (all but the fence) share one absolute expiry (`lastActivityAt + ttl`); keys
 * created later inherit the meta's.
 */
export const SESSION = `
local META, MSGS, SUMS, STATE, FENCE = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local OPS, OPSQ, BRANCHES = KEYS[6], KEYS[7], KEYS[8]
local function expireAt(at, ttl)
  if ttl > 0 then
    local t = math.floor(at + ttl)
    for _, i in ipairs({1, 2, 3, 4, 6, 7, 8}) do redis.call('PEXPIREAT', KEYS[i], t) end
  end
end
local function inheritExpiry(key)
  local t = redis.call('PEXPIRETIME', META)
  if t > 0 then redis.call('PEXPIREAT', key, t) end
end
`;

/** ARGV: userId, createdAt, lastActivityAt, metadata JSON, ttl. Returns 0 when the id is taken. */
export const CREATE = script(
  "create",
  `${SESSION}
if redis.call('EXISTS', META) == 1 then return 0 end
redis.call('DEL', MSGS, SUMS, STATE, OPS, OPSQ, BRANCHES)
redis.call('HSET', META, 'userId', ARGV[1], 'createdAt', ARGV[2], 'lastActivityAt', ARGV[3],
  'metadata', ARGV[4], 'first', '1', 'sumSeq', '0', 'branchSeq', '0')
expireAt(tonumber(ARGV[3]), tonumber(ARGV[5]))
return 1`,
);

/** The stored messages within seq bounds, then the last N or the first `limit` (ARGV from index `a`: lowest, highest, last, limit; '' unset). */
const READ_RANGE = `
local function readRange(a)
  local n = redis.call('LLEN', MSGS)
  if n == 0 then return {} end
  local first = tonumber(redis.call('HGET', META, 'first') or '1')
  local lo, hi = first, first + n - 1
  if ARGV[a] ~= '' then lo = math.max(lo, tonumber(ARGV[a])) end
  if ARGV[a + 1] ~= '' then hi = math.min(hi, tonumber(ARGV[a + 1])) end
  if ARGV[a + 2] ~= '' then lo = math.max(lo, hi - tonumber(ARGV[a + 2]) + 1)
  elseif ARGV[a + 3] ~= '' then hi = math.min(hi, lo + tonumber(ARGV[a + 3]) - 1) end
  if hi < lo then return {} end
  return redis.call('LRANGE', MSGS, lo - first, hi - first)
end
`;

/** ARGV: lowest seq, highest seq, last, limit ('' for unset). Returns the stored message strings. */
export const RANGE = script("range", `${SESSION}${READ_RANGE}
return readRange(1)`);

/**
 * An owner-scoped read. ARGV: owner, activeSince ('' none), from, to, last, limit ('' each when unset).
 * Returns {1, items…}, or {-1} for a missing, expired or other owner's session.
 */
export const OWNED_RANGE = script(
  "owned-range",
  `${SESSION}${READ_RANGE}
local owner = redis.call('HMGET', META, 'userId', 'lastActivityAt')
if not owner[1] or owner[1] ~= ARGV[1] or (ARGV[2] ~= '' and tonumber(owner[2]) < tonumber(ARGV[2])) then return {-1} end
local out = readRange(3)
table.insert(out, 1, 1)
return out`,
);

/** Returns {1, message}, {0} when there is none, {-1} for a missing session. */
export const POP = script(
  "pop",
  `${SESSION}
if redis.call('EXISTS', META) == 0 then return {-1} end
local last = redis.call('RPOP', MSGS)
if not last then return {0} end
return {1, last}`,
);

/** ARGV: seq. Returns {removed} or {-1} for a missing session. */
export const TRUNCATE = script(
  "truncate",
  `${SESSION}
if redis.call('EXISTS', META) == 0 then return {-1} end
local n = redis.call('LLEN', MSGS)
if n == 0 then return {0} end
local keep = math.floor(tonumber(ARGV[1])) - tonumber(redis.call('HGET', META, 'first') or '1') + 1
if keep >= n then return {0} end
if keep <= 0 then
  redis.call('DEL', MSGS)
  return {n}
end
redis.call('LTRIM', MSGS, 0, keep - 1)
return {n - keep}`,
);

/** ARGV: summary JSON object without its id. Returns {id} or {-1}. */
export const SUMMARY = script(
  "summary",
  `${SESSION}
if redis.call('EXISTS', META) == 0 then return {-1} end
local id = redis.call('HINCRBY', META, 'sumSeq', 1)
redis.call('RPUSH', SUMS, '{"id":' .. string.format('%d', id) .. ',' .. string.sub(ARGV[1], 2))
inheritExpiry(SUMS)
return {id}`,
);

/** Returns {1, {version, data}} or {-1}. */
export const GET_STATE = script(
  "get-state",
  `${SESSION}
if redis.call('EXISTS', META) == 0 then return {-1} end
return {1, redis.call('HMGET', STATE, 'v', 'd')}`,
);

/** ARGV: expected version, data JSON. Returns {newVersion}, {-1}, or {-2, actualVersion}. */
export const SET_STATE = script(
  "set-state",
  `${SESSION}
if redis.call('EXISTS', META) == 0 then return {-1} end
local current = tonumber(redis.call('HGET', STATE, 'v') or '0')
if current ~= tonumber(ARGV[1]) then return {-2, current} end
redis.call('HSET', STATE, 'v', current + 1, 'd', ARGV[2])
inheritExpiry(STATE)
return {current + 1}`,
);

/** The meta fields a session is read from, in this order. */
export const META_FIELDS = ["userId", "createdAt", "lastActivityAt", "metadata"] as const;

/** ARGV: metadata JSON. Returns {1, meta fields} or {-1}. */
export const SET_METADATA = script(
  "set-metadata",
  `${SESSION}
if redis.call('EXISTS', META) == 0 then return {-1} end
redis.call('HSET', META, 'metadata', ARGV[1])
return {1, redis.call('HMGET', META, ${META_FIELDS.map((f) => `'${f}'`).join(", ")})}`,
);

/**
 * ARGV: at ('' for "now, never backwards"), now, ttl. An explicit past `at` may expire the session
 * on the spot, as it would on any store measuring expiry from the last activity.
 * Returns {1, userId, lastActivityAt} or {-1}.
 */
export const TOUCH = script(
  "touch",
  `${SESSION}
if redis.call('EXISTS', META) == 0 then return {-1} end
local at
if ARGV[1] == '' then
  at = math.max(tonumber(redis.call('HGET', META, 'lastActivityAt')), tonumber(ARGV[2]))
else
  at = tonumber(ARGV[1])
end
redis.call('HSET', META, 'lastActivityAt', at)
local result = {1, redis.call('HGET', META, 'userId'), redis.call('HGET', META, 'lastActivityAt')}
expireAt(at, tonumber(ARGV[3]))
return result`,
);

/** Returns the owner of the deleted session, or nil when there was none. The fence key stays. */
export const DELETE = script(
  "delete",
  `${SESSION}
local user = redis.call('HGET', META, 'userId')
if not user then return false end
redis.call('DEL', META, MSGS, SUMS, STATE, OPS, OPSQ, BRANCHES)
return user`,
);

/**
 * ARGV: olderThan. Deletes the session only if it is still inactive (it may have been used since
 * the index was read). Returns {0} when gone already, {1, userId} when deleted now,
 * {2, userId, lastActivityAt} when it is active after all.
 */
export const EXPIRE_ONE = script(
  "expire-one",
  `${SESSION}
local v = redis.call('HMGET', META, 'userId', 'lastActivityAt')
if not v[1] then return {0} end
if tonumber(v[2]) >= tonumber(ARGV[1]) then return {2, v[1], v[2]} end
redis.call('DEL', META, MSGS, SUMS, STATE, OPS, OPSQ, BRANCHES)
return {1, v[1]}`,
);

/**
 * Recording activity in the session indexes, as Lua functions (of USER_INDEX and GLOBAL_INDEX, and of
 * the history write on a single Redis). mode: 'gt' never lowers a score, 'set' sets it; score and id
 * are strings; expireAt and trimBelow are '' when unset.
 * `recordOwner`: one owner's index (session ids by last activity); the key's expiry is only ever extended.
 * `recordGlobal`: the activity index (for `expire()`) and the id index (all scores 0, so ids come back
 * in byte order for `listAllSessions`). Trimming drops a bounded number of expired sessions per call,
 * so the indexes do not grow with sessions that Redis expired by itself.
 */
export const RECORD = `
local function record(key, mode, score, id)
  if mode == 'gt' then redis.call('ZADD', key, 'GT', score, id) else redis.call('ZADD', key, score, id) end
end
local function recordOwner(key, mode, score, id, expireAt, trimBelow)
  record(key, mode, score, id)
  if trimBelow ~= '' then redis.call('ZREMRANGEBYSCORE', key, '-inf', '(' .. trimBelow) end
  if expireAt ~= '' then
    local current = redis.call('PEXPIRETIME', key)
    if current == -1 or (current > 0 and current < tonumber(expireAt)) then redis.call('PEXPIREAT', key, expireAt) end
  end
end
local function recordGlobal(activity, ids, mode, score, id, trimBelow)
  record(activity, mode, score, id)
  redis.call('ZADD', ids, 0, id)
  if trimBelow ~= '' then
    local old = redis.call('ZRANGE', activity, '-inf', '(' .. trimBelow, 'BYSCORE', 'LIMIT', 0, 100)
    if #old > 0 then
      redis.call('ZREM', activity, unpack(old))
      redis.call('ZREM', ids, unpack(old))
    end
  end
end
`;

/** KEYS: one owner's index. ARGV: mode, score, session id, expireAt, trimBelow (see {@link RECORD}). */
export const USER_INDEX = script("user-index", `${RECORD}
recordOwner(KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5])
return 1`);

/**
 * KEYS: the global activity index and the global id index (both carry one hash tag). ARGV: mode,
 * score, session id, trimBelow (see {@link RECORD}).
 */
export const GLOBAL_INDEX = script("global-index", `${RECORD}
recordGlobal(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3], ARGV[4])
return 1`);

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
