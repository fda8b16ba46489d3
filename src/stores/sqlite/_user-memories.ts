/** The SQLite store's memories about users (table `user_memories`, schema version 10). */
import type Database from "better-sqlite3";
import { ThreadkeepError } from "../../core/errors.js";
import { applyMemoryPatch, decodeMemoryCursor, memoryFromInput, memoryPageLimit, memoryPageOf } from "../../core/store/user-memories.js";
import type { ListOptions, UserMemory, UserMemoryInput, UserMemoryPage, UserMemoryPatch } from "../../core/types.js";

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

const toRow = (m: UserMemory) => [m.userId, m.id, m.text, m.createdAt, m.updatedAt, JSON.stringify(m.source), JSON.stringify(m.metadata), JSON.stringify(m.history)];

/** The memory calls over one open database; statements are prepared once. */
export function sqliteUserMemories(db: Database.Database) {
  const st = {
    insert: db.prepare("INSERT OR IGNORE INTO user_memories (user_id, id, text, created_at, updated_at, source, metadata, history) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"),
    get: db.prepare("SELECT * FROM user_memories WHERE user_id = ? AND id = ?"),
    first: db.prepare("SELECT * FROM user_memories WHERE user_id = ? ORDER BY updated_at DESC, id DESC LIMIT ?"),
    after: db.prepare(
      "SELECT * FROM user_memories WHERE user_id = ? AND (updated_at < ? OR (updated_at = ? AND id < ?)) ORDER BY updated_at DESC, id DESC LIMIT ?",
    ),
    update: db.prepare("UPDATE user_memories SET text = ?, updated_at = ?, metadata = ?, history = ? WHERE user_id = ? AND id = ?"),
    delete: db.prepare("DELETE FROM user_memories WHERE user_id = ? AND id = ?"),
    deleteAll: db.prepare("DELETE FROM user_memories WHERE user_id = ?"),
  };
  const update = db.transaction((userId: string, id: string, patch: UserMemoryPatch): UserMemory => {
    const row = st.get.get(userId, id) as Row | undefined;
    if (!row) throw new ThreadkeepError("not_found", `Memory ${id} not found`);
    const next = applyMemoryPatch(fromRow(row), patch);
    st.update.run(next.text, next.updatedAt, JSON.stringify(next.metadata), JSON.stringify(next.history), userId, id);
    return next;
  });
  return {
    add(input: UserMemoryInput): UserMemory {
      const memory = memoryFromInput(input);
      if (st.insert.run(...toRow(memory)).changes === 0) throw new ThreadkeepError("invalid_request", `Memory ${memory.id} already exists`);
      return memory;
    },
    get(userId: string, id: string): UserMemory | null {
      const row = st.get.get(userId, id) as Row | undefined;
      return row ? fromRow(row) : null;
    },
    list(userId: string, options: ListOptions = {}): UserMemoryPage {
      const limit = memoryPageLimit(options);
      const cursor = options.cursor ? decodeMemoryCursor(options.cursor) : null;
      const rows = (cursor ? st.after.all(userId, cursor.updatedAt, cursor.updatedAt, cursor.id, limit + 1) : st.first.all(userId, limit + 1)) as Row[];
      return memoryPageOf(rows.map(fromRow), limit);
    },
    update,
    delete(userId: string, id: string): boolean {
      return st.delete.run(userId, id).changes > 0;
    },
    deleteAll(userId: string): number {
      return st.deleteAll.run(userId).changes;
    },
  };
}

/** The memory calls of {@link sqliteUserMemories}. */
export type SqliteUserMemories = ReturnType<typeof sqliteUserMemories>;
