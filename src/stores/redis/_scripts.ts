/**
 * The Lua scripts of the Redis store. Every write to a session runs as one script, so seq assignment,
 * append, cap trimming, fence check and TTL refresh happen in one atomic step. A script touches only
 * keys of one session (one hash tag) or one index key, so each runs unchanged on Redis Cluster (only
 * the history write, on a single Redis, may also name the index keys: see `redis/_history.ts`). The
 * lease scripts are in `redis/_lease-scripts.ts`.
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
  /** The script never writes, so it needs no replica's acknowledgement (`wait`). */
  readonly readOnly?: boolean;
}

/** A script of `lua`, with its SHA1. */
export function script(name: string, lua: string, options: { readOnly?: boolean } = {}): RedisScript {
  return {
    name,
    lua,
    sha: createHash("sha1").update(lua).digest("hex"),
    ...(options.readOnly ? { readOnly: true } : {}),
  };
}

/**
 * How long a session's keys outlive its inactivity expiry (`lastActivityAt + ttl`): a tenth of the
 * TTL, at most an hour. Within that margin a write leaves the keys' expiry as it is, so moving the
 * expiry of every key of a session costs one write per margin of activity, not every write.
 */
export const EXPIRY_MARGIN_MS = 3_600_000;

/** When Redis removes the keys of a session last active at `at` (see {@link EXPIRY_MARGIN_MS} and `SESSION`). */
export function keysExpireAt(at: number, ttlMs: number): number {
  return Math.floor(at + ttlMs + Math.min(Math.floor(ttlMs / 10), EXPIRY_MARGIN_MS));
}

/**
 * Session data scripts take KEYS = meta, msgs, sums, state, fence, ops, opsq, branches. Expiry: the data
 * keys of a session (all but the fence) share one absolute expiry, which the meta also holds in its
 * `expiresAt` field (so a write reads it with the meta, at no cost); keys created later inherit the
 * meta's. `expireAt(at, ttl)` sets it to {@link keysExpireAt} (`exact`: to `at + ttl`, an explicit
 * touch); a write moves it only when it would fall before `lastActivityAt + ttl` (`expiryDue`), so no
 * key of a session expires before the session does, and none outlives it by more than the margin.
 */
export const SESSION = `
local META, MSGS, SUMS, STATE, FENCE = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local OPS, OPSQ, BRANCHES = KEYS[6], KEYS[7], KEYS[8]
local function expireAt(at, ttl, exact)
  if ttl > 0 then
    local t = math.floor(at + ttl)
    if not exact then t = math.floor(at + ttl + math.min(math.floor(ttl / 10), ${EXPIRY_MARGIN_MS})) end
    for _, i in ipairs({1, 2, 3, 4, 6, 7, 8}) do redis.call('PEXPIREAT', KEYS[i], t) end
    redis.call('HSET', META, 'expiresAt', t)
    return string.format('%d', t)
  end
end
local function inheritExpiry(key)
  local t = redis.call('PEXPIRETIME', META)
  if t > 0 then redis.call('PEXPIREAT', key, t) end
end
`;

/**
 * Whether a write with activity \`at\` must move the keys' expiry (\`expiresAt\`: the meta's field, or nil):
 * also when the meta's real expiry is earlier than the field says, as after a write of a process of an
 * earlier version (which sets the keys' expiry to \`at + ttl\` and knows no field) during an upgrade.
 */
export const EXPIRY_DUE = `
local function expiryDue(expiresAt, at, ttl)
  return ttl > 0 and (not expiresAt or tonumber(expiresAt) < at + ttl or redis.call('PEXPIRETIME', META) < tonumber(expiresAt))
end
`;

/**
 * `gone(since)`: whether the session is missing or past its TTL, its last activity before `since` (the
 * caller's now - ttl; '' or nil when the store keeps sessions without one). Its keys outlive the TTL by
 * the margin, and no call may see or revive it meanwhile: every script that reads or writes a session
 * asks this (or checks the activity it reads anyway) before anything else, and answers as for a missing one.
 */
export const GONE = `
local function gone(since)
  local last = redis.call('HGET', META, 'lastActivityAt')
  return not last or (since ~= nil and since ~= '' and tonumber(last) < tonumber(since))
end
`;

/** The `since` argument of {@link GONE} at this moment for a store of `ttlMs`. */
export function goneBefore(ttlMs: number): string {
  return ttlMs > 0 ? String(Date.now() - ttlMs) : "";
}

/**
 * ARGV: userId, createdAt, lastActivityAt, metadata JSON, ttl, since (see {@link GONE}). Returns 0 when
 * the id is taken; a session past its TTL is replaced (its keys deleted) like a missing one.
 */
export const CREATE = script(
  "create",
  `${SESSION}${GONE}
if not gone(ARGV[6]) then return 0 end
redis.call('DEL', MSGS, SUMS, STATE, OPS, OPSQ, BRANCHES)
redis.call('HSET', META, 'userId', ARGV[1], 'createdAt', ARGV[2], 'lastActivityAt', ARGV[3],
  'metadata', ARGV[4], 'first', '1', 'sumSeq', '0', 'sumTo', '0', 'branchSeq', '0')
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

/** ARGV: lowest seq, highest seq, last, limit ('' for unset), since (see {@link GONE}). Returns the stored message strings. */
export const RANGE = script(
  "range",
  `${SESSION}${GONE}${READ_RANGE}
if gone(ARGV[5]) then return {} end
return readRange(1)`,
  { readOnly: true },
);

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
  { readOnly: true },
);

/** ARGV: since (see {@link GONE}). Returns {1, message}, {0} when there is none, {-1} for a missing session. */
export const POP = script(
  "pop",
  `${SESSION}${GONE}
if gone(ARGV[1]) then return {-1} end
local last = redis.call('RPOP', MSGS)
if not last then return {0} end
return {1, last}`,
);

/** ARGV: seq, since (see {@link GONE}). Returns {removed} or {-1} for a missing session. */
export const TRUNCATE = script(
  "truncate",
  `${SESSION}${GONE}
if gone(ARGV[2]) then return {-1} end
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

/**
 * ARGV: summary JSON object without its id, its toSeq, the session's expected createdAt ('' unset:
 * any), since (see {@link GONE}). Returns {id} or {-1} (no session, or another incarnation than the expected one). Keeps the meta's `sumTo`,
 * the furthest `toSeq` of the session's summaries (what `keepUnsummarized` caps by); a session created
 * before that field has none until the history write reads its summaries once (`summaryReach` in
 * `redis/_history.ts`).
 */
export const SUMMARY = script(
  "summary",
  `${SESSION}${GONE}
if gone(ARGV[4]) then return {-1} end
if ARGV[3] ~= '' and tonumber(redis.call('HGET', META, 'createdAt')) ~= tonumber(ARGV[3]) then return {-1} end
local id = redis.call('HINCRBY', META, 'sumSeq', 1)
redis.call('RPUSH', SUMS, '{"id":' .. string.format('%d', id) .. ',' .. string.sub(ARGV[1], 2))
inheritExpiry(SUMS)
local reach = redis.call('HGET', META, 'sumTo')
local to = tonumber(ARGV[2])
if reach and to and to > tonumber(reach) then redis.call('HSET', META, 'sumTo', ARGV[2]) end
return {id}`,
);

/** ARGV: since (see {@link GONE}). Returns {1, {version, data}} or {-1}. */
export const GET_STATE = script(
  "get-state",
  `${SESSION}${GONE}
if gone(ARGV[1]) then return {-1} end
return {1, redis.call('HMGET', STATE, 'v', 'd')}`,
  { readOnly: true },
);

/** ARGV: expected version, data JSON, since (see {@link GONE}). Returns {newVersion}, {-1}, or {-2, actualVersion}. */
export const SET_STATE = script(
  "set-state",
  `${SESSION}${GONE}
if gone(ARGV[3]) then return {-1} end
local current = tonumber(redis.call('HGET', STATE, 'v') or '0')
if current ~= tonumber(ARGV[1]) then return {-2, current} end
redis.call('HSET', STATE, 'v', current + 1, 'd', ARGV[2])
inheritExpiry(STATE)
return {current + 1}`,
);

/** The meta fields a session is read from, in this order. */
export const META_FIELDS = ["userId", "createdAt", "lastActivityAt", "metadata"] as const;

/** ARGV: metadata JSON, since (see {@link GONE}). Returns {1, meta fields} or {-1}. */
export const SET_METADATA = script(
  "set-metadata",
  `${SESSION}${GONE}
if gone(ARGV[2]) then return {-1} end
redis.call('HSET', META, 'metadata', ARGV[1])
return {1, redis.call('HMGET', META, ${META_FIELDS.map((f) => `'${f}'`).join(", ")})}`,
);

/**
 * ARGV: at ('' for "now, never backwards"), now, ttl. An explicit past `at` may expire the session
 * on the spot, as it would on any store measuring expiry from the last activity.
 * Returns {1, userId, lastActivityAt} or {-1} (missing, or past its TTL).
 */
export const TOUCH = script(
  "touch",
  `${SESSION}
local last = redis.call('HGET', META, 'lastActivityAt')
if not last then return {-1} end
-- Past its TTL a session is gone (its keys outlive it by the margin): a touch must not revive it.
if tonumber(ARGV[3]) > 0 and tonumber(last) < tonumber(ARGV[2]) - tonumber(ARGV[3]) then return {-1} end
local at
if ARGV[1] == '' then
  at = math.max(tonumber(last), tonumber(ARGV[2]))
else
  at = tonumber(ARGV[1])
end
redis.call('HSET', META, 'lastActivityAt', at)
local result = {1, redis.call('HGET', META, 'userId'), redis.call('HGET', META, 'lastActivityAt')}
-- An explicit time is taken as it is: a past one may expire the session's keys now.
expireAt(at, tonumber(ARGV[3]), ARGV[1] ~= '')
return result`,
);

/**
 * ARGV: since (see {@link GONE}). Returns {owner, 1} of the deleted session, {owner, 0} when its keys
 * were there but it was past its TTL (gone already: they are deleted all the same), or nil when there
 * was none. The fence key stays.
 */
export const DELETE = script(
  "delete",
  `${SESSION}${GONE}
local user = redis.call('HGET', META, 'userId')
if not user then return false end
local live = 1
if gone(ARGV[1]) then live = 0 end
redis.call('DEL', META, MSGS, SUMS, STATE, OPS, OPSQ, BRANCHES)
return {user, live}`,
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
 * the history writes on a single Redis). mode: 'gt' never lowers a score, 'set' sets it; score and id
 * are strings; expireAt and trimBelow are '' when unset.
 * `recordOwner`: one owner's index (session ids by last activity); the key's expiry is only ever
 * extended, and kept at or past that of the keys of every session in it. Returns 1 when the session
 * was not in it.
 * `recordGlobal`: the activity index (for `expire()`) and the id index (all scores 0, so ids come back
 * in byte order for `listAllSessions`). A session is in both or in neither (they change together, in
 * one script or one MULTI), so an activity update ('gt') adds to the id index only when it added to
 * the activity index. Trimming drops a bounded number of expired sessions per call, so the indexes do
 * not grow with sessions that Redis expired by itself.
 */
export const RECORD = `
local function record(key, mode, score, id)
  if mode == 'gt' then return redis.call('ZADD', key, 'GT', score, id) end
  return redis.call('ZADD', key, score, id)
end
local function extendExpiry(key, expireAt)
  local current = redis.call('PEXPIRETIME', key)
  if current == -1 or (current > 0 and current < tonumber(expireAt)) then redis.call('PEXPIREAT', key, expireAt) end
end
local function trimOwner(key, below)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', '(' .. below)
end
local function trimGlobal(activity, ids, below)
  local old = redis.call('ZRANGE', activity, '-inf', '(' .. below, 'BYSCORE', 'LIMIT', 0, 100)
  if #old > 0 then
    redis.call('ZREM', activity, unpack(old))
    redis.call('ZREM', ids, unpack(old))
  end
end
local function recordOwner(key, mode, score, id, expireAt, trimBelow)
  local added = record(key, mode, score, id)
  if trimBelow ~= '' then trimOwner(key, trimBelow) end
  if expireAt ~= '' then extendExpiry(key, expireAt) end
  return added
end
local function recordGlobal(activity, ids, mode, score, id, trimBelow)
  if record(activity, mode, score, id) == 1 or mode ~= 'gt' then redis.call('ZADD', ids, 0, id) end
  if trimBelow ~= '' then trimGlobal(activity, ids, trimBelow) end
end
`;

/**
 * A third mode for the two scripts below, '=' .. a score ('=' alone: no entry): 'set' while the entry
 * (of KEYS[1]) is still what the caller read, else 'gt', so an update that landed since is never undone.
 */
const EXPECTED = `
local function expected(key, mode, id)
  if string.sub(mode, 1, 1) ~= '=' then return mode end
  if (redis.call('ZSCORE', key, id) or '') == string.sub(mode, 2) then return 'set' end
  return 'gt'
end
`;

/** KEYS: one owner's index. ARGV: mode, score, session id, expireAt, trimBelow (see {@link RECORD}, {@link EXPECTED}). */
export const USER_INDEX = script(
  "user-index",
  `${RECORD}${EXPECTED}
recordOwner(KEYS[1], expected(KEYS[1], ARGV[1], ARGV[3]), ARGV[2], ARGV[3], ARGV[4], ARGV[5])
return 1`,
);

/**
 * KEYS: the global activity index and the global id index (both carry one hash tag). ARGV: mode,
 * score, session id, trimBelow (see {@link RECORD}, {@link EXPECTED}: of the activity index).
 */
export const GLOBAL_INDEX = script(
  "global-index",
  `${RECORD}${EXPECTED}
recordGlobal(KEYS[1], KEYS[2], expected(KEYS[1], ARGV[1], ARGV[3]), ARGV[2], ARGV[3], ARGV[4])
return 1`,
);
