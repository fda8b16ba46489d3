import { isThreadkeepError, SessionNotFoundError } from "../../core/errors.js";
import type { Message, MessageQuery, MessageRange, OwnerScope } from "../../core/types.js";
import { parseMessages, type RedisKeys } from "./_codec.js";
import type { RedisConnection } from "./_connection.js";
import * as S from "./_scripts.js";
import { checkOwner, seqBounds } from "../_util.js";

/**
 * LRANGE bounds of a read without seq bounds: the last N, else the first `limit`, else all. One LRANGE
 * suffices because every stored message carries its seq.
 */
function unrangedWindow(last: number | undefined, limit: number | undefined): [string, string] {
  if (last !== undefined && Number.isFinite(last)) return [String(-last), "-1"];
  if (limit !== undefined && Number.isFinite(limit)) return ["0", String(limit - 1)];
  return ["0", "-1"];
}

/**
 * A session's messages that `query` selects: one LRANGE, one MULTI or one script, by the query's shape.
 * A session past the store's TTL (`ttlMs`; its keys kept for the margin) reads as a missing one.
 */
export async function readMessages(
  db: RedisConnection,
  keys: RedisKeys,
  ttlMs: number,
  id: string,
  query: MessageQuery,
): Promise<Message[]> {
  const { data: dataKeys } = keys;
  const ranged = [query.afterSeq, query.beforeSeq, query.fromSeq, query.toSeq].some((b) => b !== undefined);
  const last = query.last === undefined ? undefined : Math.trunc(query.last);
  const limit = query.limit === undefined ? undefined : Math.trunc(query.limit);
  if (last !== undefined && last <= 0) return [];
  if (last === undefined && limit !== undefined && limit <= 0) return [];
  const since = S.goneBefore(ttlMs);
  // Owner-scoped, the TTL is one more bound on the activity the read checks anyway.
  const owner =
    query.owner && since !== ""
      ? { userId: query.owner.userId, activeSince: Math.max(query.owner.activeSince ?? -Infinity, Number(since)) }
      : query.owner;
  let items: string[];
  if (owner && !ranged) {
    // Owner-scoped "last N" (the hot read): the owner and activity and the window in one MULTI on the
    // session's slot, atomic like a script but cheaper on the server; the owner is checked before
    // anything read leaves this function.
    const [meta, read] = await db.transaction<[(string | null)[], string[]]>([
      ["HMGET", dataKeys(id)[0], "userId", "lastActivityAt"],
      ["LRANGE", dataKeys(id)[1], ...unrangedWindow(last, limit)],
    ]);
    checkOwner(id, owner, meta[0] == null ? null : { userId: meta[0], lastActivityAt: Number(meta[1]) });
    items = read;
  } else if (owner) {
    // Owner-scoped with seq bounds: the owner and expiry are checked in the script that reads.
    const [from, to] = seqBounds(query);
    const reply = await db.eval<(number | string)[]>(S.OWNED_RANGE, dataKeys(id), [
      owner.userId,
      owner.activeSince === undefined ? "" : String(owner.activeSince),
      ranged ? String(from) : "",
      ranged ? String(to) : "",
      last === undefined ? "" : String(last),
      limit === undefined ? "" : String(limit),
    ]);
    if (reply[0] === -1) throw new SessionNotFoundError(id);
    items = reply.slice(1) as string[];
  } else if (ranged) {
    const [from, to] = seqBounds(query);
    items = await db.eval<string[]>(S.RANGE, dataKeys(id), [
      String(from),
      String(to),
      last === undefined ? "" : String(last),
      limit === undefined ? "" : String(limit),
      since,
    ]);
  } else {
    items = await liveRead<string[]>(
      db,
      dataKeys(id)[0],
      ttlMs,
      ["LRANGE", dataKeys(id)[1], ...unrangedWindow(last, limit)],
      [],
    );
  }
  return parseMessages(id, items);
}

/**
 * Several owner-scoped ranges (`RangeReadStore`): one owner-checking script a range, all sent at once,
 * so the client pipelines them (on a cluster each goes to its session's node). A session missing,
 * another owner's or expired reads as empty.
 */
export function readMessageRanges(
  db: RedisConnection,
  keys: RedisKeys,
  ttlMs: number,
  ranges: readonly MessageRange[],
  owner: OwnerScope,
): Promise<Message[][]> {
  return Promise.all(
    ranges.map(({ sessionId, fromSeq, toSeq }) =>
      readMessages(db, keys, ttlMs, sessionId, { fromSeq, toSeq, owner }).catch((error: unknown) => {
        if (isThreadkeepError(error, "session_not_found")) return [] as Message[];
        throw error;
      }),
    ),
  );
}

/**
 * `command` on a session's keys, read with the session's activity (`metaKey`) in one MULTI: a session
 * past the TTL (its keys still there for the margin) reads as a missing one, `empty`. Without a TTL,
 * the command alone.
 */
export async function liveRead<T>(
  db: RedisConnection,
  metaKey: string,
  ttlMs: number,
  command: string[],
  empty: T,
): Promise<T> {
  if (ttlMs <= 0) return db.send<T>(command);
  const [last, read] = await db.transaction<[string | null, T]>([["HGET", metaKey, "lastActivityAt"], command]);
  return last === null || Number(last) < Date.now() - ttlMs ? empty : read;
}
