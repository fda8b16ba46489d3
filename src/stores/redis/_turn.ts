/**
 * Opening a turn on Redis in one script: the lease poll and, in the poll that grants, the session,
 * its newest messages, summaries and state, so a turn whose lease is free costs one round trip before
 * the model is asked (the call-by-call way, `openTurn` of `core/open-turn.ts`, costs five).
 */
import type { OpenedTurn, TurnOpening } from "../../core/types.js";
import { type TurnRead, unread, withLease } from "../../core/open-turn.js";
import { parseMessages, parseState, parseSummaries, toSession } from "./_codec.js";
import type { RedisLeases } from "./_lease.js";
import { LEASE, POLL } from "./_lease-scripts.js";
import { script } from "./_scripts.js";

/**
 * KEYS: lease, queue, alive, qseq, fence, then the session's meta, msgs, sums, state. ARGV: as
 * LEASE_POLL, then owner, activeSince ('' none), last ('' all), the store's TTL bound (the `since` of
 * `GONE` in `redis/_scripts.ts`: a session past its TTL is 'missing', whoever asks). Returns {0, position} while waiting;
 * when granted {1, fence, status} and, for 'ok', the meta fields (userId, createdAt, lastActivityAt,
 * metadata), the number of messages and the messages, the number of summaries and the summaries, and
 * the state's version and data.
 */
export const TURN_OPEN = script(
  "turn-open",
  `${LEASE}${POLL}
local META, MSGS, SUMS, STATE = KEYS[6], KEYS[7], KEYS[8], KEYS[9]
local granted, value = poll()
if not granted then return {0, value} end
local s = redis.call('HMGET', META, 'userId', 'createdAt', 'lastActivityAt', 'metadata')
if not s[1] or (ARGV[9] ~= '' and tonumber(s[3]) < tonumber(ARGV[9])) then return {1, value, 'missing'} end
if s[1] ~= ARGV[6] then return {1, value, 'foreign'} end
if ARGV[7] ~= '' and tonumber(s[3]) < tonumber(ARGV[7]) then return {1, value, 'expired'} end
local out = {1, value, 'ok', s[1], s[2], s[3], s[4]}
local function add(items)
  out[#out + 1] = #items
  for _, item in ipairs(items) do out[#out + 1] = item end
end
if ARGV[8] == '' then add(redis.call('LRANGE', MSGS, 0, -1))
elseif tonumber(ARGV[8]) > 0 then add(redis.call('LRANGE', MSGS, -tonumber(ARGV[8]), -1))
else add({}) end
add(redis.call('LRANGE', SUMS, 0, -1))
local state = redis.call('HMGET', STATE, 'v', 'd')
out[#out + 1] = state[1]
out[#out + 1] = state[2]
return out`,
);

/** TURN_OPEN's ARGV after the poll's: owner, activeSince, last, the TTL bound (`since`, '' none). */
export function turnOpenArgs(opening: TurnOpening, since: string): string[] {
  const last = opening.last;
  return [
    opening.owner.userId,
    opening.owner.activeSince === undefined ? "" : String(opening.owner.activeSince),
    Number.isFinite(last) ? String(Math.max(0, Math.trunc(last))) : "",
    since,
  ];
}

/** What TURN_OPEN read after the fence (the reply from `status` on). @throws `store_corrupt`. */
function decodeTurn(id: string, read: unknown[]): TurnRead {
  const status = String(read[0]) as OpenedTurn["status"];
  if (status !== "ok") return unread(status);
  const session = toSession(id, read.slice(1, 5) as (string | null)[]);
  let at = 5;
  const take = () => {
    const n = Number(read[at]);
    const items = read.slice(at + 1, at + 1 + n) as string[];
    at += 1 + n;
    return items;
  };
  const messages = parseMessages(id, take());
  const summaries = parseSummaries(id, take());
  const state = parseState(id, read[at] as string | null, read[at + 1] as string | null);
  return { status, session, messages, summaries, state };
}

/**
 * The Redis store's `openTurn`: waits in line as `acquireLease` does, and the granting poll reads
 * (see {@link TURN_OPEN}). The session's owner stays with the lease for the write that releases it.
 */
export async function openRedisTurn(leases: RedisLeases, id: string, opening: TurnOpening): Promise<OpenedTurn> {
  const { lease, read, setOwner } = await leases.open(id, opening);
  return withLease(lease, () => {
    const turn = decodeTurn(id, read);
    if (turn.session) setOwner(turn.session.userId);
    return turn;
  });
}
