/**
 * The Redis store's plain append (no operation id, no lease to release, not a replacement) as a script
 * of its own: the commonest write, made of the calls it needs and nothing else. It names only the keys
 * it touches, defines almost no Lua functions (each is a closure made on every call), and leaves the
 * rare work to the full history write (`WRITE` in `redis/_history.ts`), which it hands over to by
 * refusing before it changes anything: a write that must move the keys' expiry (once per margin of
 * activity, see `SESSION` in `redis/_scripts.ts`). Both scripts keep the same data the same way: what
 * they share is the inline Lua of `redis/_push.ts`.
 */
import { ACTIVITY, NEW_LIST_EXPIRY, PUSH_AND_CAP, recordIndexes, SAVE_META } from "./_push.js";
import { type RedisScript, script } from "./_scripts.js";

/** The options of a plain append after its messages, in the order of {@link APPEND}'s ARGV. */
export const APPEND_OPTIONS = [
  "now",
  "ttl",
  "maxMessages",
  "indexOwner",
  "sessionId",
  "owner",
  "activeSince",
  "fence",
  "keepUnsummarized",
] as const;

/** What {@link APPEND} answers when the full history write must do the append instead. */
export const APPEND_HANDOVER = -7;

/**
 * KEYS: meta, msgs; then, on a single Redis when `indexOwner` is set, the owner's index and the global
 * activity and id indexes; then, when a fence or keepUnsummarized is given, sums and fence.
 * ARGV: the number of messages, one JSON object per message (with createdAt, without seq), then the
 * options of {@link APPEND_OPTIONS}, trailing empty ones left out (as in `WRITE`).
 * Returns {firstSeq, lastActivityAt, userId, indexed (1 when the indexes were updated here)}; {-1}
 * missing session (or, owner-scoped, another owner's or an expired one); {-2} stale fence;
 * {APPEND_HANDOVER} nothing done: the keys' expiry is due to move (the full write does that).
 */
export const APPEND: RedisScript = script(
  "append",
  `-- Numbers by arithmetic (x + 0): tonumber() parses a string twice (lua_isnumber, then lua_tonumber),
-- and strtod on a 13-digit timestamp is a good part of this script's own work.
local count = ARGV[1] + 0
local o = count + 2
local now, ttl, max = ARGV[o] + 0, ARGV[o + 1] + 0, ARGV[o + 2] + 0
local indexOwner, sessionId, owner = ARGV[o + 3] or '', ARGV[o + 4] or '', ARGV[o + 5] or ''
local activeSince, fence, unsummarized = ARGV[o + 6] or '', ARGV[o + 7] or '', ARGV[o + 8] or ''
local META, MSGS = KEYS[1], KEYS[2]
local X = 3
if indexOwner ~= '' then X = 6 end
local SUMS = KEYS[X]
local meta = redis.call('HMGET', META, 'userId', 'lastActivityAt', 'first', 'sumTo', 'expiresAt')
local user = meta[1]
if not user then return {-1} end
if owner ~= '' and (user ~= owner or (activeSince ~= '' and meta[2] + 0 < activeSince + 0)) then return {-1} end
${ACTIVITY}
-- As expiryDue (redis/_scripts.ts): also when the keys expire earlier than the field says (a write of
-- an earlier version during an upgrade sets them to its activity + ttl).
if ttl > 0 then
  local expires = meta[5] and meta[5] + 0
  if not expires or expires < score + ttl or redis.call('PEXPIRETIME', META) < expires then return {${APPEND_HANDOVER}} end
end
if fence ~= '' and (redis.call('GET', KEYS[X + 1]) or 0) + 0 > fence + 0 then return {-2} end
local n = redis.call('LLEN', MSGS)
local first = 1
if n > 0 then first = (meta[3] or 1) + 0 end
local newFirst = nil
if n == 0 then newFirst = first end
local seq0 = first + n
${PUSH_AND_CAP}${SAVE_META}${NEW_LIST_EXPIRY}
local indexed = 0
if indexOwner ~= '' and indexOwner == user then
  -- As in WRITE: the write has applied, so an index that cannot be updated must not fail it.
  if pcall(function()${recordIndexes(3, "meta[5]")}  end) then indexed = 1 end
end
return {seq0, score, user, indexed}`,
);
