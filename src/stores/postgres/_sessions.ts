/** The PostgreSQL store's session rows: create, read, list, touch, re-label and delete. */
import { SessionNotFoundError } from "../../core/errors.js";
import type { ListOptions, SessionInput, FullStore } from "../../core/types.js";
import type { PgRun } from "./_operations.js";
import { listByActivity } from "./_activity.js";
import { ms, type SessionRow, toSession } from "./_rows.js";
import { DEFAULT_LIST_LIMIT, decodeCursor, encodeCursor } from "../_util.js";

/** The session methods of the store, each one statement through `run`. */
export function sessionMethods(
  run: PgRun,
): Pick<
  FullStore,
  | "createSession"
  | "getSession"
  | "getSessions"
  | "listSessions"
  | "listAllSessions"
  | "deleteSession"
  | "touchSession"
  | "updateSessionMetadata"
> {
  return {
    createSession: (input: SessionInput) =>
      run("createSession", async (sql) => {
        const [row] = await sql<SessionRow[]>`
          WITH t AS (SELECT coalesce(${ms(input.createdAt)}::bigint, threadkeep_now_ms()) AS created)
          INSERT INTO sessions (id, user_id, created_at, last_activity_at, metadata)
          SELECT ${input.id}, ${input.userId}, t.created, coalesce(${ms(input.lastActivityAt)}::bigint, t.created),
                 ${JSON.stringify(input.metadata ?? {})}
          FROM t
          RETURNING id, user_id, created_at, last_activity_at, metadata`;
        return toSession(row);
      }),

    getSession: (id) =>
      run("getSession", async (sql) => {
        const [row] = await sql<SessionRow[]>`
          SELECT id, user_id, created_at, last_activity_at, metadata FROM sessions WHERE id = ${id}`;
        return row ? toSession(row) : null;
      }),

    getSessions: async (ids) => {
      if (ids.length === 0) return [];
      const rows = await run(
        "getSessions",
        (sql) => sql<SessionRow[]>`
          SELECT id, user_id, created_at, last_activity_at, metadata FROM sessions WHERE id = ANY(${[...new Set(ids)]}::text[])`,
      );
      const byId = new Map(rows.map((row) => [row.id, row]));
      return ids.map((id) => {
        const row = byId.get(id);
        return row ? toSession(row) : null;
      });
    },

    listSessions: (userId: string, list: ListOptions = {}) =>
      run("listSessions", async (sql) => {
        const limit = list.limit ?? DEFAULT_LIST_LIMIT;
        const cursor = list.cursor ? decodeCursor(list.cursor) : null;
        const rows = await listByActivity(sql, userId, Math.max(0, limit) + 1, cursor);
        const sessions = rows.slice(0, limit).map(toSession);
        const last = sessions.at(-1);
        return { sessions, nextCursor: rows.length > limit && last ? encodeCursor(last) : null };
      }),

    listAllSessions: (list: ListOptions = {}) =>
      run("listAllSessions", async (sql) => {
        const limit = list.limit ?? DEFAULT_LIST_LIMIT;
        // Ids compare in byte order (COLLATE "C"), the order the other stores give.
        const rows = await sql<SessionRow[]>`
          SELECT id, user_id, created_at, last_activity_at, metadata FROM sessions
          WHERE id > ${list.cursor ?? ""} ORDER BY id LIMIT ${Math.max(0, limit) + 1}`;
        const sessions = rows.slice(0, limit).map(toSession);
        const last = sessions.at(-1);
        return { sessions, nextCursor: rows.length > limit && last ? last.id : null };
      }),

    deleteSession: (id) =>
      run("deleteSession", async (sql) => (await sql`DELETE FROM sessions WHERE id = ${id}`).count > 0),

    touchSession: (id, at) =>
      run("touchSession", async (sql) => {
        const result = await sql`
          UPDATE sessions SET last_activity_at = coalesce(${ms(at)}::bigint, threadkeep_now_ms()) WHERE id = ${id}`;
        if (result.count === 0) throw new SessionNotFoundError(id);
      }),

    updateSessionMetadata: (id, metadata) =>
      run("updateSessionMetadata", async (sql) => {
        const [row] = await sql<SessionRow[]>`
          UPDATE sessions SET metadata = ${JSON.stringify(metadata)} WHERE id = ${id}
          RETURNING id, user_id, created_at, last_activity_at, metadata`;
        if (!row) throw new SessionNotFoundError(id);
        return toSession(row);
      }),
  };
}
