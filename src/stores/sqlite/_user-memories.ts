/** The SQLite store's memories about users (table `user_memories`, schema version 10; their embeddings, version 11). */
import type Database from "better-sqlite3";
import { ThreadkeepError } from "../../core/errors.js";
import {
  applyMemoryPatch,
  decodeMemoryCursor,
  decodeUserIdCursor,
  encodeUserIdCursor,
  memoryFromInput,
  memoryPageLimit,
  memoryPageOf,
} from "../../core/user-memories/store-helpers.js";
import type {
  ListOptions,
  MemoryOwnersStore,
  UserIdPage,
  UserMemory,
  UserMemoryEmbeddingInput,
  UserMemoryInput,
  UserMemoryPage,
  UserMemoryPatch,
  UserMemoryStore,
  UserMemoryVectorHit,
  UserMemoryVectorQuery,
  UserMemoryVectorStore,
} from "../../core/types.js";
import type { SqliteConnection } from "./_connection.js";
import type { SqliteStoreDb } from "./_db.js";
import {
  checkDimensions,
  normalize,
  packVector,
  scanMemoryVectors,
  type StoredMemoryVector,
  unpackVector,
} from "../_vectors.js";
import { memoryFromRow, type UserMemoryRow } from "../_util.js";

const toRow = (m: UserMemory) => [
  m.userId,
  m.id,
  m.text,
  m.createdAt,
  m.updatedAt,
  JSON.stringify(m.source),
  JSON.stringify(m.metadata),
  JSON.stringify(m.history),
];

/** What a memory's row is read as: its embedding (a large blob) is read only by the vector calls. */
const COLUMNS = "user_id, id, text, created_at, updated_at, source, metadata, history";

/** The memory calls of the SQLite store, each one statement or transaction. */
export interface SqliteUserMemories {
  add(input: UserMemoryInput): UserMemory;
  get(userId: string, id: string): UserMemory | null;
  owners(options?: ListOptions): UserIdPage;
  list(userId: string, options?: ListOptions): UserMemoryPage;
  update(userId: string, id: string, patch: UserMemoryPatch): UserMemory;
  delete(userId: string, id: string): boolean;
  deleteAll(userId: string): number;
  putEmbeddings(userId: string, model: string, items: UserMemoryEmbeddingInput[]): void;
  missingEmbeddings(userId: string, model: string, limit: number): { id: string; text: string }[];
  searchVectors(query: UserMemoryVectorQuery): UserMemoryVectorHit[];
}

/** The memory calls over one open database; statements are prepared once. */
export function sqliteUserMemories(db: Database.Database): SqliteUserMemories {
  const st = {
    insert: db.prepare(
      "INSERT OR IGNORE INTO user_memories (user_id, id, text, created_at, updated_at, source, metadata, history) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
    ),
    owners: db.prepare("SELECT DISTINCT user_id FROM user_memories WHERE user_id > ? ORDER BY user_id LIMIT ?"),
    get: db.prepare(`SELECT ${COLUMNS} FROM user_memories WHERE user_id = ? AND id = ?`),
    first: db.prepare(
      `SELECT ${COLUMNS} FROM user_memories WHERE user_id = ? ORDER BY updated_at DESC, id DESC LIMIT ?`,
    ),
    after: db.prepare(
      `SELECT ${COLUMNS} FROM user_memories WHERE user_id = ? AND (updated_at < ? OR (updated_at = ? AND id < ?)) ORDER BY updated_at DESC, id DESC LIMIT ?`,
    ),
    // A new text clears the embedding (the right-hand sides read the row as it was).
    update: db.prepare(
      `UPDATE user_memories SET text = @text, updated_at = @updatedAt, metadata = @metadata, history = @history,
         embedding = CASE WHEN text = @text THEN embedding END, embedding_model = CASE WHEN text = @text THEN embedding_model END
       WHERE user_id = @userId AND id = @id`,
    ),
    dims: db.prepare(
      "SELECT length(embedding) / 4 AS dims FROM user_memories WHERE user_id = ? AND embedding_model = ? AND embedding IS NOT NULL LIMIT 1",
    ),
    putVector: db.prepare(
      "UPDATE user_memories SET embedding_model = ?, embedding = ? WHERE user_id = ? AND id = ? AND text = ?",
    ),
    missing: db.prepare(
      "SELECT id, text FROM user_memories WHERE user_id = ? AND (embedding IS NULL OR embedding_model IS NOT ?) LIMIT ?",
    ),
    vectors: db.prepare(
      "SELECT id, text, embedding FROM user_memories WHERE user_id = ? AND embedding_model = ? AND embedding IS NOT NULL",
    ),
    delete: db.prepare("DELETE FROM user_memories WHERE user_id = ? AND id = ?"),
    deleteAll: db.prepare("DELETE FROM user_memories WHERE user_id = ?"),
  };
  const update = db.transaction((userId: string, id: string, patch: UserMemoryPatch): UserMemory => {
    const row = st.get.get(userId, id) as UserMemoryRow | undefined;
    if (!row) throw new ThreadkeepError("not_found", `Memory ${id} not found`);
    const next = applyMemoryPatch(memoryFromRow(row), patch);
    st.update.run({
      text: next.text,
      updatedAt: next.updatedAt,
      metadata: JSON.stringify(next.metadata),
      history: JSON.stringify(next.history),
      userId,
      id,
    });
    return next;
  });
  const putEmbeddings = db.transaction((userId: string, model: string, items: UserMemoryEmbeddingInput[]): void => {
    let dims = (st.dims.get(userId, model) as { dims: number } | undefined)?.dims;
    for (const item of items) {
      checkDimensions(model, dims, item.vector.length);
      dims = item.vector.length;
    }
    for (const item of items) st.putVector.run(model, packVector(normalize(item.vector)), userId, item.id, item.text);
  });
  return {
    add(input: UserMemoryInput): UserMemory {
      const memory = memoryFromInput(input);
      if (st.insert.run(...toRow(memory)).changes === 0)
        throw new ThreadkeepError("invalid_request", `Memory ${memory.id} already exists`);
      return memory;
    },
    owners(options: ListOptions = {}): UserIdPage {
      const limit = memoryPageLimit(options);
      const after = options.cursor ? decodeUserIdCursor(options.cursor) : "";
      const userIds = (st.owners.all(after, limit + 1) as { user_id: string }[]).map((r) => r.user_id);
      const page = userIds.slice(0, limit);
      return { userIds: page, nextCursor: userIds.length > limit ? encodeUserIdCursor(page[page.length - 1]) : null };
    },
    get(userId: string, id: string): UserMemory | null {
      const row = st.get.get(userId, id) as UserMemoryRow | undefined;
      return row ? memoryFromRow(row) : null;
    },
    list(userId: string, options: ListOptions = {}): UserMemoryPage {
      const limit = memoryPageLimit(options);
      const cursor = options.cursor ? decodeMemoryCursor(options.cursor) : null;
      const rows = (
        cursor
          ? st.after.all(userId, cursor.updatedAt, cursor.updatedAt, cursor.id, limit + 1)
          : st.first.all(userId, limit + 1)
      ) as UserMemoryRow[];
      return memoryPageOf(rows.map(memoryFromRow), limit);
    },
    update,
    delete(userId: string, id: string): boolean {
      return st.delete.run(userId, id).changes > 0;
    },
    deleteAll(userId: string): number {
      return st.deleteAll.run(userId).changes;
    },
    putEmbeddings,
    missingEmbeddings(userId: string, model: string, limit: number): { id: string; text: string }[] {
      return st.missing.all(userId, model, limit) as { id: string; text: string }[];
    },
    searchVectors(query: UserMemoryVectorQuery): UserMemoryVectorHit[] {
      const rows = st.vectors.all(query.userId, query.model) as { id: string; text: string; embedding: Buffer }[];
      const vectors = new Map<string, StoredMemoryVector>(
        rows.map((r) => [r.id, { model: query.model, text: r.text, vector: unpackVector(r.embedding) }]),
      );
      return scanMemoryVectors(rows, (id) => vectors.get(id), query);
    },
  };
}

type UserMemoryMethods = UserMemoryStore & MemoryOwnersStore & UserMemoryVectorStore;

/** The user memory methods of the store; the statements are prepared on first use. */
export function userMemoryMethods({ use, change }: SqliteConnection): UserMemoryMethods {
  let calls: SqliteUserMemories | undefined;
  const memories = (db: SqliteStoreDb) => (calls ??= sqliteUserMemories(db.db));
  return {
    addUserMemory: async (input) => change((db) => memories(db).add(input)),
    listMemoryOwners: async (options) => use((db) => memories(db).owners(options)),
    getUserMemory: async (userId, id) => use((db) => memories(db).get(userId, id)),
    listUserMemories: async (userId, options) => use((db) => memories(db).list(userId, options)),
    updateUserMemory: async (userId, id, patch) => change((db) => memories(db).update(userId, id, patch)),
    deleteUserMemory: async (userId, id) => change((db) => memories(db).delete(userId, id)),
    deleteUserMemories: async (userId) => change((db) => memories(db).deleteAll(userId)),
    putUserMemoryEmbeddings: async (userId, model, items) =>
      change((db) => memories(db).putEmbeddings(userId, model, items)),
    missingUserMemoryEmbeddings: async (userId, model, limit = 100) =>
      use((db) => memories(db).missingEmbeddings(userId, model, limit)),
    searchUserMemoryVectors: async (query) => use((db) => memories(db).searchVectors(query)),
  };
}
