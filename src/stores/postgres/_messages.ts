/** The PostgreSQL store's message reads and deletions that are no append: read, count, pop, truncate. */
import type postgres from "postgres";
import { SessionNotFoundError } from "../../core/errors.js";
import type { Message, MessageQuery, FullStore } from "../../core/types.js";
import type { PgRun } from "./_operations.js";
import { type MessageRow, toMessage } from "./_rows.js";
import type { PgSql } from "./_client.js";
import { checkOwner, seqBounds } from "../_util.js";

/** The message methods of the store besides writes of history. */
export function messageReads(
  run: PgRun,
): Pick<FullStore, "getMessages" | "getMessageRanges" | "countMessages" | "popMessage" | "truncateAfter"> {
  /** Locks the session row for a change of its messages; the seq lock appends also take. */
  const lockSession = async (tx: postgres.TransactionSql<Record<string, unknown>>, id: string) => {
    const [row] = await tx`SELECT id FROM sessions WHERE id = ${id} FOR UPDATE`;
    if (!row) throw new SessionNotFoundError(id);
  };
  const resetLastSeq = (tx: postgres.TransactionSql<Record<string, unknown>>, id: string) =>
    tx`UPDATE sessions SET last_seq = coalesce((SELECT max(seq) FROM messages WHERE session_id = ${id}), 0) WHERE id = ${id}`;

  /**
   * An owner-scoped read in one statement: the messages of the session id a subquery on `sessions`
   * returns for this owner and activity, so the owner and expiry are checked on the same snapshot as
   * the read, and rows carry only their own columns. An empty answer reads the session apart, to tell
   * "no messages" from `session_not_found`.
   */
  const ownedMessages = async (sql: PgSql, id: string, query: MessageQuery): Promise<Message[]> => {
    const [lo, hi] = seqBounds(query);
    const newest = query.last !== undefined;
    const count = newest
      ? Math.max(0, Math.floor(query.last!))
      : query.limit === undefined
        ? null
        : Math.max(0, Math.floor(query.limit));
    const { userId, activeSince } = query.owner!;
    const since = activeSince ?? Number.MIN_SAFE_INTEGER;
    // Whole statements rather than one with an ORDER BY fragment: a fragment is one more query
    // object to build and stringify on every read. The newest messages with no seq range (what
    // `Memory` reads every turn) go without the unbounded BETWEEN: two parameters and two index
    // conditions fewer, 2–4 µs a read, and the subquery keeps the prepared statement on its generic
    // plan without it (docs/decisions/0002-postgres-schema.md).
    const unbounded = lo === Number.MIN_SAFE_INTEGER && hi === Number.MAX_SAFE_INTEGER;
    const rows =
      newest && unbounded
        ? await sql<MessageRow[]>`
      SELECT seq, created_at, body FROM messages
      WHERE session_id = (SELECT id FROM sessions WHERE id = ${id} AND user_id = ${userId} AND last_activity_at >= ${since})
      ORDER BY seq DESC LIMIT ${count}`
        : newest
          ? await sql<MessageRow[]>`
      SELECT seq, created_at, body FROM messages
      WHERE session_id = (SELECT id FROM sessions WHERE id = ${id} AND user_id = ${userId} AND last_activity_at >= ${since})
        AND seq BETWEEN ${lo} AND ${hi}
      ORDER BY seq DESC LIMIT ${count}`
          : await sql<MessageRow[]>`
      SELECT seq, created_at, body FROM messages
      WHERE session_id = (SELECT id FROM sessions WHERE id = ${id} AND user_id = ${userId} AND last_activity_at >= ${since})
        AND seq BETWEEN ${lo} AND ${hi}
      ORDER BY seq LIMIT ${count}`;
    if (rows.length === 0) {
      const [session] = await sql<{ userId: string; lastActivityAt: number }[]>`
        SELECT user_id AS "userId", last_activity_at AS "lastActivityAt" FROM sessions WHERE id = ${id}`;
      checkOwner(id, query.owner, session);
      return [];
    }
    if (newest) rows.reverse();
    const messages = new Array<Message>(rows.length);
    for (let i = 0; i < rows.length; i++) messages[i] = toMessage(rows[i]);
    return messages;
  };

  return {
    getMessages: (id: string, query: MessageQuery = {}) =>
      run("getMessages", async (sql) => {
        if (query.owner) return ownedMessages(sql, id, query);
        if (query.last !== undefined && query.last <= 0) return [];
        // Every filter folds into one seq range, so each read is a single index range scan.
        const [lo, hi] = seqBounds(query);
        if (query.last !== undefined) {
          // Keep the range even when it is unbounded: with it PostgreSQL's generic plan is cheap, so the
          // prepared statement is planned once; `LIMIT $n` alone makes it re-plan on every call.
          const rows = await sql<MessageRow[]>`
            SELECT seq, created_at, body FROM messages WHERE session_id = ${id} AND seq BETWEEN ${lo} AND ${hi}
            ORDER BY seq DESC LIMIT ${Math.floor(query.last)}`;
          return rows.reverse().map(toMessage);
        }
        const rows = await sql<MessageRow[]>`
          SELECT seq, created_at, body FROM messages WHERE session_id = ${id} AND seq BETWEEN ${lo} AND ${hi}
          ORDER BY seq LIMIT ${query.limit === undefined ? null : Math.max(0, Math.floor(query.limit))}`;
        return rows.map(toMessage);
      }),

    // Every range in one statement: the owner and activity checked by a join on `sessions` (a session
    // failing them gives no rows, so its ranges read as empty), each range an index range scan.
    getMessageRanges: (ranges, owner) =>
      ranges.length === 0
        ? Promise.resolve([])
        : run("getMessageRanges", async (sql) => {
            const ids: string[] = [];
            const froms: number[] = [];
            const tos: number[] = [];
            for (const range of ranges) {
              const [lo, hi] = seqBounds(range);
              ids.push(range.sessionId);
              froms.push(lo);
              tos.push(hi);
            }
            const rows = await sql<(MessageRow & { i: number })[]>`
              SELECT r.i::int AS i, m.seq, m.created_at, m.body
              FROM unnest(${ids}::text[], ${froms}::int8[], ${tos}::int8[]) WITH ORDINALITY AS r(session_id, from_seq, to_seq, i)
              JOIN sessions s ON s.id = r.session_id COLLATE "C"
                AND s.user_id = ${owner.userId} AND s.last_activity_at >= ${owner.activeSince ?? Number.MIN_SAFE_INTEGER}
              JOIN messages m ON m.session_id = s.id AND m.seq BETWEEN r.from_seq AND r.to_seq
              ORDER BY r.i, m.seq`;
            const read = ranges.map((): Message[] => []);
            for (const row of rows) read[row.i - 1].push(toMessage(row));
            return read;
          }),

    countMessages: (id) =>
      run("countMessages", async (sql) => {
        const [row] = await sql<{ n: number }[]>`SELECT count(*)::integer AS n FROM messages WHERE session_id = ${id}`;
        return row.n;
      }),

    popMessage: (id) =>
      run("popMessage", (sql) =>
        sql.begin(async (tx) => {
          await lockSession(tx, id);
          const [row] = await tx<MessageRow[]>`
            DELETE FROM messages WHERE session_id = ${id}
              AND seq = (SELECT max(seq) FROM messages WHERE session_id = ${id})
            RETURNING seq, created_at, body`;
          if (!row) return null;
          await resetLastSeq(tx, id);
          return toMessage(row);
        }),
      ),

    truncateAfter: (id, seq) =>
      run("truncateAfter", (sql) =>
        sql.begin(async (tx) => {
          await lockSession(tx, id);
          const result =
            await tx`DELETE FROM messages WHERE session_id = ${id} AND seq > ${seqBounds({ toSeq: seq })[1]}`;
          if (result.count > 0) await resetLastSeq(tx, id);
          return result.count;
        }),
      ),
  };
}
