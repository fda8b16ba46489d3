/** The SQLite store's session rows: create, read, list, touch, re-label and delete. */
import { SessionNotFoundError, ThreadkeepError } from "../../core/errors.js";
import type { FullStore } from "../../core/types.js";
import type { SqliteConnection } from "./_connection.js";
import type { TurnLeases } from "./_lease.js";
import { DEFAULT_LIST_LIMIT, decodeCursor, encodeCursor } from "../_util.js";

/** The session methods of the store; a deleted session's lease is forgotten. */
export function sessionMethods(
  { use, change }: SqliteConnection,
  leases: Pick<TurnLeases, "forget">,
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
    async createSession(input) {
      return change(({ st }) => {
        const createdAt = input.createdAt ?? Date.now();
        const lastActivityAt = input.lastActivityAt ?? createdAt;
        const metadata = JSON.stringify(input.metadata ?? {});
        if (st.insertSession.run(input.id, input.userId, createdAt, lastActivityAt, metadata).changes === 0) {
          throw new ThreadkeepError("session_exists", `Session ${input.id} already exists`);
        }
        return {
          id: input.id,
          userId: input.userId,
          createdAt,
          lastActivityAt,
          metadata: JSON.parse(metadata),
        };
      });
    },

    async getSession(id) {
      return use((db) => {
        const row = db.st.getSession.get(id);
        return row ? db.session(row) : null;
      });
    },

    async getSessions(ids) {
      // One synchronous pass: no write lands between two of the reads.
      return use((db) =>
        ids.map((id) => {
          const row = db.st.getSession.get(id);
          return row ? db.session(row) : null;
        }),
      );
    },

    async listSessions(userId, list = {}) {
      return use((db) => {
        const limit = list.limit ?? DEFAULT_LIST_LIMIT;
        const cursor = list.cursor ? decodeCursor(list.cursor) : null;
        const rows = cursor
          ? db.st.listAfter.all(userId, cursor.lastActivityAt, cursor.id, limit + 1)
          : db.st.listFirst.all(userId, limit + 1);
        const sessions = rows.slice(0, limit).map(db.session);
        const last = sessions.at(-1);
        return { sessions, nextCursor: rows.length > limit && last ? encodeCursor(last) : null };
      });
    },

    async listAllSessions(list = {}) {
      return use((db) => {
        const limit = list.limit ?? DEFAULT_LIST_LIMIT;
        const rows = db.st.listAll.all(list.cursor ?? "", limit + 1);
        const sessions = rows.slice(0, limit).map(db.session);
        const last = sessions.at(-1);
        return { sessions, nextCursor: rows.length > limit && last ? last.id : null };
      });
    },

    async deleteSession(id) {
      const deleted = use((db) => db.tx.deleteSession(id));
      leases.forget(id);
      return deleted;
    },

    async touchSession(id, at = Date.now()) {
      change(({ st }) => {
        if (st.touch.run(at, id).changes === 0) throw new SessionNotFoundError(id);
      });
    },

    async updateSessionMetadata(id, metadata) {
      return change((db) => {
        if (db.st.setMetadata.run(JSON.stringify(metadata), id).changes === 0) throw new SessionNotFoundError(id);
        return db.session(db.st.getSession.get(id)!);
      });
    },
  };
}
