/**
 * The Lua scripts of the Redis store's history changes: idempotent writes, tail replacement and
 * branch switches, each one atomic script on one session's keys (see `redis/_scripts.ts`).
 *
 * A branch is stored as JSON that starts `{"parentId":…,"atSeq":…,` in exactly that form, so a
 * script can read and move it without decoding the messages (cjson would not keep them lossless).
 * Applied operation ids live in `:ops` (id → "digest fromSeq toSeq") with their order in `:opsq`.
 */
import type { Branch } from "../../core/types.js";
import { OPERATION_HISTORY } from "../../core/types.js";
import { RELEASE } from "./_lease-scripts.js";
import { ACTIVITY, NEW_LIST_EXPIRY, PUSH_AND_CAP, recordIndexes, SAVE_META } from "./_push.js";
import { EXPIRY_DUE, GONE, RECORD, type RedisScript, SESSION, script } from "./_scripts.js";

/** A branch as the Redis store keeps it: `parentId` and `atSeq` first (see above). */
export function encodeBranch(branch: Branch): string {
  const { parentId, atSeq, id, reason, createdAt, metadata, messages } = branch;
  return JSON.stringify({ parentId, atSeq, id, reason, createdAt, ...(metadata ? { metadata } : {}), messages });
}

/** A stored message item of `:msgs`: its JSON with the seq first. */
export function encodeItem(message: { seq: number } & Record<string, unknown>): string {
  const { seq, ...rest } = message;
  return JSON.stringify({ seq, ...rest });
}

const BRANCH_HEAD = `
local function branchHead(json)
  local parent, at = string.match(json, '^{"parentId":([^,]*),"atSeq":(%-?%d+),')
  return parent, tonumber(at)
end
local function setParent(id, json, parent)
  local rest = string.gsub(json, '^{"parentId":[^,]*,', '', 1)
  redis.call('HSET', BRANCHES, id, '{"parentId":' .. parent .. ',' .. rest)
end
local function bounds()
  local n = redis.call('LLEN', MSGS)
  local first = 1
  if n > 0 then first = tonumber(redis.call('HGET', META, 'first') or '1') end
  return n, first, first + n - 1
end
`;

/** The options of a history write after its messages, in the order of {@link WRITE}'s ARGV. */
export const WRITE_OPTIONS = [
  "now",
  "ttl",
  "maxMessages",
  "indexOwner",
  "sessionId",
  "owner",
  "activeSince",
  "fence",
  "token",
  "operationId",
  "digest",
  "after",
  "expectedLastSeq",
  "branchReason",
  "branchMetadata",
  "keepUnsummarized",
  "sessionCreatedAt",
] as const;

/**
 * KEYS: the session's data keys; then, on a single Redis when `indexOwner` is set (to index in the
 * same step), the owner's index and the global activity and id indexes; then, when `token` is set,
 * the session's lease, queue and wake channel.
 * ARGV: the number of messages, one JSON object per message (with createdAt, without seq), then the
 * options of {@link WRITE_OPTIONS}, trailing empty ones left out (so a plain append sends few):
 * now, ttl, maxMessages (0 none), the owner whose index KEYS names ('' to leave the indexes to the
 * caller), the session id, owner ('' none: not owner-scoped), activeSince ('' none), fence ('' none),
 * lease token to release once the write applies ('' none), operation id ('' none), digest, after ('' for
 * an append), expectedLastSeq ('' none), branch reason ('' none), branch metadata JSON ('' none), '1'
 * when the cap drops nothing past the summaries' reach (keepUnsummarized) else '', the createdAt of the
 * session incarnation written to ('' any: see `AppendOptions.sessionCreatedAt`).
 * Returns {firstSeq, lastActivityAt, userId, indexed (1 when the indexes were updated here), the next
 * waiter's token ('' none) or false when no lease was released}; {-1} missing or expired
 * session (or, owner-scoped, another owner's or one inactive since activeSince); {-2} stale fence; {-3} operation conflict;
 * {-4, first, last} history conflict; {-5, next waiter's token ('' none) or false when no lease was
 * released, items…} an operation applied before (its lease released as an applied write's is).
 *
 * A lease released here also advances the fence: a renew of it landing later finds the lease given
 * back rather than lapsed, so it cannot take it back (see LEASE_RENEW).
 */
export const WRITE: RedisScript = script(
  "history-write",
  `${SESSION}${EXPIRY_DUE}${BRANCH_HEAD}${RECORD}
local count = tonumber(ARGV[1])
local o = count + 2
local function opt(i) return ARGV[o + i] or '' end
local now, ttl, max, indexOwner, sessionId = tonumber(ARGV[o]), tonumber(ARGV[o + 1]), tonumber(ARGV[o + 2]), opt(3), opt(4)
local owner, activeSince, fence, token, op, digest = opt(5), opt(6), opt(7), opt(8), opt(9), opt(10)
local L = 9
if indexOwner ~= '' then L = 12 end
local LEASE, QUEUE = KEYS[L], KEYS[L + 1]
${RELEASE}
-- The meta fields this write needs, in one read: the owner (nil: no session), activity, first seq,
-- the summaries' reach and the keys' expiry.
local meta = redis.call('HMGET', META, 'userId', 'lastActivityAt', 'first', 'sumTo', 'expiresAt')
local user = meta[1]
if not user then return {-1} end
if owner ~= '' and (user ~= owner or (activeSince ~= '' and tonumber(meta[2]) < tonumber(activeSince))) then return {-1} end
-- A guarded write: only into the incarnation of the session it names.
if opt(16) ~= '' and tonumber(redis.call('HGET', META, 'createdAt')) ~= tonumber(opt(16)) then return {-1} end
-- Past its TTL a session is gone (its keys outlive it by the margin): a write must not revive it. APPEND
-- hands such a write over here (its expiry is due), so the check costs the lean script nothing.
if ttl > 0 and tonumber(meta[2]) < now - ttl then return {-1} end
local n = redis.call('LLEN', MSGS)
local first = 1
if n > 0 then first = tonumber(meta[3] or '1') end
local last = first + n - 1
if op ~= '' then
  local rec = redis.call('HGET', OPS, op)
  if rec then
    local applied, from, to = string.match(rec, '^(%S+) (%-?%d+) (%-?%d+)$')
    if applied ~= digest then return {-3} end
    local lo, hi = math.max(first, tonumber(from)), math.min(last, tonumber(to))
    -- A replay changes nothing, but it ends its turn as the write did: the lease goes back (only if
    -- this writer's token still holds it).
    local next = false
    if token ~= '' then
      next = releaseLease(token, KEYS[L + 2])
      if next and redis.call('EXISTS', FENCE) == 1 then redis.call('INCR', FENCE) end
    end
    local out = {-5, next}
    if n > 0 and hi >= lo then
      for _, item in ipairs(redis.call('LRANGE', MSGS, lo - first, hi - first)) do out[#out + 1] = item end
    end
    return out
  end
end
if fence ~= '' then
  local current = tonumber(redis.call('GET', FENCE) or '0')
  if current > tonumber(fence) then return {-2} end
end
local after = last
if opt(11) ~= '' then
  local seq, expected, reason = tonumber(opt(11)), opt(12), opt(13)
  if (expected ~= '' and tonumber(expected) ~= last) or seq < first - 1 or seq > last then return {-4, first, last} end
  after = seq
  local keep = seq - first + 1
  if keep < n then
    if reason ~= '' then
      local id = redis.call('HINCRBY', META, 'branchSeq', 1)
      local all = redis.call('HGETALL', BRANCHES)
      for i = 1, #all, 2 do
        local parent, at = branchHead(all[i + 1])
        if parent == 'null' and at > seq then setParent(all[i], all[i + 1], string.format('%d', id)) end
      end
      local extra = ''
      if opt(14) ~= '' then extra = ',"metadata":' .. opt(14) end
      redis.call('HSET', BRANCHES, id, '{"parentId":null,"atSeq":' .. string.format('%d', seq) .. ',"id":' ..
        string.format('%d', id) .. ',"reason":"' .. reason .. '","createdAt":' .. string.format('%d', now) .. extra ..
        ',"messages":[' .. table.concat(redis.call('LRANGE', MSGS, math.max(keep, 0), -1), ',') .. ']}')
      inheritExpiry(BRANCHES)
    end
    if keep <= 0 then redis.call('DEL', MSGS) else redis.call('LTRIM', MSGS, 0, keep - 1) end
    n = math.max(keep, 0)
  end
end
-- The new first seq, when it moves: written with the activity below, in one HSET.
local newFirst = nil
if n == 0 then
  first = after + 1
  newFirst = first
end
local seq0 = after + 1
local unsummarized = opt(15)
${PUSH_AND_CAP}
if op ~= '' then
  redis.call('HSET', OPS, op, digest .. ' ' .. string.format('%d', seq0) .. ' ' .. string.format('%d', seq0 + count - 1))
  redis.call('RPUSH', OPSQ, op)
  if redis.call('LLEN', OPSQ) > ${OPERATION_HISTORY} then redis.call('HDEL', OPS, redis.call('LPOP', OPSQ)) end
  inheritExpiry(OPS)
  inheritExpiry(OPSQ)
end
${ACTIVITY}${SAVE_META}
local at = tonumber(score)
local result = {seq0, score, user, 0, false}
-- The keys' expiry moves once per margin of activity (see SESSION).
local due = expiryDue(meta[5], at, ttl)
local keysExpire = meta[5]
if due then keysExpire = expireAt(at, ttl) else ${NEW_LIST_EXPIRY}end
if indexOwner ~= '' and indexOwner == user then
  -- The write above has applied: an index that cannot be updated (a key of another type) must not
  -- fail it. Left unindexed (result[4] = 0), the caller records the activity in a step of its own.
  -- The indexes' housekeeping (the owner index's expiry, trimming expired sessions) rides on the
  -- writes that move the keys' expiry.
  if pcall(function()${recordIndexes(9, "keysExpire", "due")}
    if due then
      local below = string.format('%d', now - ttl)
      trimOwner(KEYS[9], below)
      trimGlobal(KEYS[10], KEYS[11], below)
    end
  end) then result[4] = 1 end
end
if token ~= '' then
  local next = releaseLease(token, KEYS[L + 2])
  if next then
    if redis.call('EXISTS', FENCE) == 1 then redis.call('INCR', FENCE) end
    result[5] = next
  end
end
return result`,
);

/**
 * ARGV: now, ttl, fence ('' none), branch id, the branch's stored JSON as read (the switch applies
 * only if it is unchanged), the head of its new JSON (everything before the messages), then its
 * messages as `:msgs` items. Returns {1, lastActivityAt, userId, items of the former tail…};
 * {-1} missing session (or past its TTL); {-2} stale fence; {-4, first, last} history conflict; {-6} the branch changed.
 */
export const SWITCH: RedisScript = script(
  "history-switch",
  `${SESSION}${GONE}${BRANCH_HEAD}
if gone(tonumber(ARGV[2]) > 0 and tonumber(ARGV[1]) - tonumber(ARGV[2]) or nil) then return {-1} end
if ARGV[3] ~= '' then
  local current = tonumber(redis.call('GET', FENCE) or '0')
  if current > tonumber(ARGV[3]) then return {-2} end
end
local id = ARGV[4]
if redis.call('HGET', BRANCHES, id) ~= ARGV[5] then return {-6} end
local _, at = branchHead(ARGV[5])
local n, first, last = bounds()
if at < first - 1 or at > last then return {-4, first, last} end
local keep = at - first + 1
local tail = {}
if keep < n then tail = redis.call('LRANGE', MSGS, math.max(keep, 0), -1) end
local all = redis.call('HGETALL', BRANCHES)
for i = 1, #all, 2 do
  local parent, bat = branchHead(all[i + 1])
  if parent == id then setParent(all[i], all[i + 1], 'null')
  elseif parent == 'null' and all[i] ~= id and bat > at then setParent(all[i], all[i + 1], id) end
end
if keep <= 0 then redis.call('DEL', MSGS) elseif keep < n then redis.call('LTRIM', MSGS, 0, keep - 1) end
if keep <= 0 then redis.call('HSET', META, 'first', at + 1) end
for i = 7, #ARGV, 1000 do redis.call('RPUSH', MSGS, unpack(ARGV, i, math.min(i + 999, #ARGV))) end
redis.call('HSET', BRANCHES, id, ARGV[6] .. table.concat(tail, ',') .. ']}')
local now = math.max(tonumber(redis.call('HGET', META, 'lastActivityAt')), tonumber(ARGV[1]))
redis.call('HSET', META, 'lastActivityAt', now)
local result = {1, redis.call('HGET', META, 'lastActivityAt'), redis.call('HGET', META, 'userId')}
for _, item in ipairs(tail) do result[#result + 1] = item end
expireAt(now, tonumber(ARGV[2]))
return result`,
);

/**
 * ARGV: branch id ('' for the next), its JSON built by the caller around the id placeholder, since
 * (see {@link GONE}). Returns {id} or {-1}.
 */
export const SAVE_BRANCH: RedisScript = script(
  "history-save-branch",
  `${SESSION}${GONE}
if gone(ARGV[3]) then return {-1} end
local id
if ARGV[1] == '' then
  id = redis.call('HINCRBY', META, 'branchSeq', 1)
else
  id = tonumber(ARGV[1])
  if id > tonumber(redis.call('HGET', META, 'branchSeq') or '0') then redis.call('HSET', META, 'branchSeq', id) end
end
redis.call('HSET', BRANCHES, id, (string.gsub(ARGV[2], '"id":0,', '"id":' .. string.format('%d', id) .. ',', 1)))
inheritExpiry(BRANCHES)
return {id}`,
);
