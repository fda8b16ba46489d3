/**
 * The Lua the two history writes share (the lean `APPEND` of `redis/_append.ts` and the full `WRITE`
 * of `redis/_history.ts`): pushing messages with their seqs, the cap, the meta's activity, a new
 * list's expiry and the index updates. Plain inline code (no Lua functions, each a closure made on
 * every call), interpolated into both scripts, so they keep the same data the same way.
 *
 * They read the locals both scripts define: `count` (messages in ARGV[2..count+1]), `o` (first
 * option), `now`, `ttl`, `max`, `sessionId`, `meta` (HMGET userId, lastActivityAt, first, sumTo,
 * expiresAt), `n` (the list's length before the push), `first`, `seq0`, `newFirst`, `unsummarized`,
 * and `META`, `MSGS`, `SUMS`.
 */

/**
 * The furthest seq the session's summaries reach (0: none): `keepUnsummarized` drops nothing past it.
 * The meta keeps it as `sumTo` (see SUMMARY), passed in as `known`; a session created before that
 * field existed has its summaries read once, and the field set.
 */
export const SUMMARY_REACH = `
-- Summaries are stored as {"id":…,"fromSeq":…,"toSeq":…, (see SUMMARY); one of another shape counts
-- as reaching nothing, so the cap keeps more rather than less.
local function summaryReach(known)
  if known then return tonumber(known) end
  local reach = 0
  for _, item in ipairs(redis.call('LRANGE', SUMS, 0, -1)) do
    local to = tonumber(string.match(item, '^{"id":%d+,"fromSeq":%-?%d+,"toSeq":(%-?%d+)[,}]'))
    if to and to > reach then reach = to end
  end
  redis.call('HSET', META, 'sumTo', string.format('%d', reach))
  return reach
end
`;

/**
 * Pushes the messages with seqs from `seq0` (1,000 per RPUSH), then applies the cap (`max`, 0 none),
 * which, when `unsummarized` is '1' (or '1:<hardCap>'), drops nothing past the summaries' reach (but
 * everything past the ceiling `hardCap`); sets `newFirst` when it
 * drops. `summaryReach` is defined only when the cap needs it.
 */
export const PUSH_AND_CAP = `
local batch = {}
for i = 2, count + 1 do
  batch[#batch + 1] = '{"seq":' .. string.format('%d', seq0 + i - 2) .. ',' .. string.sub(ARGV[i], 2)
  if #batch == 1000 then
    redis.call('RPUSH', MSGS, unpack(batch))
    batch = {}
  end
end
if #batch > 0 then redis.call('RPUSH', MSGS, unpack(batch)) end
local total = n + count
if max > 0 and total > max then
  local drop = total - max
  if unsummarized ~= '' then
    ${SUMMARY_REACH}
    drop = math.min(drop, summaryReach(meta[4]) - first + 1)
    -- '1:<n>': the ceiling (hardCap), past which the oldest go whatever the summaries reach.
    local hard = tonumber(string.match(unsummarized, '^1:(%d+)$'))
    if hard and total - hard > drop then drop = total - hard end
  end
  if drop > 0 then
    redis.call('LTRIM', MSGS, drop, -1)
    newFirst = first + drop
  end
end
`;

/**
 * The write's activity as \`score\`: it never moves back. Kept as a string (the stored one when it is
 * ahead of now), so the reply and the indexes carry exactly what the meta holds.
 */
export const ACTIVITY = `
local score = ARGV[o]
if meta[2] + 0 >= now then score = meta[2] end
`;

/** Writes the activity and the new first seq (when it moved) to the meta, in one HSET (none when neither changed). */
export const SAVE_META = `
if newFirst then redis.call('HSET', META, 'lastActivityAt', score, 'first', newFirst)
elseif score ~= meta[2] then redis.call('HSET', META, 'lastActivityAt', score) end
`;

/** A list this write made anew takes the session's expiry (the meta's, when the write leaves it). */
export const NEW_LIST_EXPIRY = `
if ttl > 0 and count > 0 and n == 0 then redis.call('PEXPIREAT', MSGS, meta[5]) end
`;

/**
 * Records \`score\` in the owner's index KEYS[key] and the global activity and id indexes (the two
 * keys after it). The owner's index must outlive the session's keys (\`expireAt\`, a Lua expression):
 * its expiry is extended when the session is new to it (or the key made anew), or when \`extendWhen\`
 * (a Lua expression) holds; it never shortens.
 */
export function recordIndexes(key: number, expireAt: string, extendWhen = ""): string {
  const when = extendWhen ? `(added == 1 or ${extendWhen})` : "added == 1";
  return `
local added = redis.call('ZADD', KEYS[${key}], 'GT', score, sessionId)
if ttl > 0 and ${when} then
  local current = redis.call('PEXPIRETIME', KEYS[${key}])
  if current == -1 or (current > 0 and current < tonumber(${expireAt})) then redis.call('PEXPIREAT', KEYS[${key}], ${expireAt}) end
end
-- In both global indexes or in neither (see RECORD in redis/_scripts.ts).
if redis.call('ZADD', KEYS[${key + 1}], 'GT', score, sessionId) == 1 then redis.call('ZADD', KEYS[${key + 2}], 0, sessionId) end
`;
}
