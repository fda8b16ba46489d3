/** The PostgreSQL store's memories about users (table `user_memories`, schema version 16). */
import { ThreadkeepError } from "../../core/errors.js";
import { applyMemoryPatch, decodeMemoryCursor, memoryFromInput, memoryPageLimit, memoryPageOf } from "../../core/store/user-memories.js";
import type { FullStore, UserMemory, UserMemoryStore } from "../../core/types.js";
import type { PgSql } from "./_client.js";
import type { PgRun } from "./_operations.js";

interface Row {
  user_id: string;
  id: string;
  text: string;
  created_at: number;
  updated_at: number;
  source: string;
  metadata: string;
  history: string;
}

const fromRow = (row: Row): UserMemory => ({
  id: row.id,
  userId: row.user_id,
  text: row.text,
  createdAt: row.created_at,
  updatedAt: row.updated_at,
  source: JSON.parse(row.source),
  metadata: JSON.parse(row.metadata),
  history: JSON.parse(row.history),
});

const notFound = (id: string) => new ThreadkeepError("not_found", `Memory ${id} not found`);

/** The memory methods of the store. */
export function userMemoryMethods(run: PgRun): Pick<FullStore, keyof UserMemoryStore> {
  return {
    addUserMemory: (input) =>
      run("addUserMemory", async (sql) => {
        const m = memoryFromInput(input);
        const rows = await sql`
          INSERT INTO user_memories (user_id, id, text, created_at, updated_at, source, metadata, history)
          VALUES (${m.userId}, ${m.id}, ${m.text}, ${m.createdAt}, ${m.updatedAt}, ${JSON.stringify(m.source)}, ${JSON.stringify(m.metadata)}, ${JSON.stringify(m.history)})
          ON CONFLICT DO NOTHING RETURNING id`;
        if (rows.length === 0) throw new ThreadkeepError("invalid_request", `Memory ${m.id} already exists`);
        return m;
      }),

    getUserMemory: (userId, id) =>
      run("getUserMemory", async (sql) => {
        const [row] = await sql<Row[]>`SELECT * FROM user_memories WHERE user_id = ${userId} AND id = ${id}`;
        return row ? fromRow(row) : null;
      }),

    listUserMemories: (userId, options = {}) =>
      run("listUserMemories", async (sql) => {
        const limit = memoryPageLimit(options);
        const cursor = options.cursor ? decodeMemoryCursor(options.cursor) : null;
        const rows = cursor
          ? await sql<Row[]>`
              SELECT * FROM user_memories WHERE user_id = ${userId} AND (updated_at, id) < (${cursor.updatedAt}, ${cursor.id})
              ORDER BY updated_at DESC, id DESC LIMIT ${limit + 1}`
          : await sql<Row[]>`SELECT * FROM user_memories WHERE user_id = ${userId} ORDER BY updated_at DESC, id DESC LIMIT ${limit + 1}`;
        return memoryPageOf(rows.map(fromRow), limit);
      }),

    updateUserMemory: (userId, id, patch) =>
      run("updateUserMemory", (sql) =>
        sql.begin(async (tx) => {
          const t = tx as unknown as PgSql;
          const [row] = await t<Row[]>`SELECT * FROM user_memories WHERE user_id = ${userId} AND id = ${id} FOR UPDATE`;
          if (!row) throw notFound(id);
          const next = applyMemoryPatch(fromRow(row), patch);
          await t`
            UPDATE user_memories SET text = ${next.text}, updated_at = ${next.updatedAt}, metadata = ${JSON.stringify(next.metadata)},
              history = ${JSON.stringify(next.history)}
            WHERE user_id = ${userId} AND id = ${id}`;
          return next;
        }) as Promise<UserMemory>,
      ),

    deleteUserMemory: (userId, id) =>
      run("deleteUserMemory", async (sql) => (await sql`DELETE FROM user_memories WHERE user_id = ${userId} AND id = ${id}`).count > 0),

    deleteUserMemories: (userId) => run("deleteUserMemories", async (sql) => (await sql`DELETE FROM user_memories WHERE user_id = ${userId}`).count),
  };
}
