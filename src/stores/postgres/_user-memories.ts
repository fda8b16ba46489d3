/** The PostgreSQL store's memories about users (table `user_memories`, schema version 17; their embeddings, version 18). */
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
  FullStore,
  MemoryOwnersStore,
  UserMemory,
  UserMemoryStore,
  UserMemoryVectorStore,
} from "../../core/types.js";
import {
  checkDimensions,
  dimensionMismatch,
  normalize,
  packVector,
  scanMemoryVectors,
  unpackVector,
} from "../_vectors.js";
import type { PgSql } from "./_client.js";
import type { PgRun } from "./_operations.js";
import { memoryFromRow, type UserMemoryRow } from "../_util.js";

/** What a memory's row is read as: its embedding is read only by the vector calls. */
const COLUMNS = "user_id, id, text, created_at, updated_at, source, metadata, history";

const notFound = (id: string) => new ThreadkeepError("not_found", `Memory ${id} not found`);

/** The memory methods of the store. */
export function userMemoryMethods(
  run: PgRun,
): Pick<FullStore, keyof UserMemoryStore | keyof MemoryOwnersStore> & UserMemoryVectorStore {
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

    listMemoryOwners: (options = {}) =>
      run("listMemoryOwners", async (sql) => {
        const limit = memoryPageLimit(options);
        const after = options.cursor ? decodeUserIdCursor(options.cursor) : "";
        // COLLATE "C": byte order, the same as the cursor's comparison whatever the database's locale.
        const rows = await sql<{ user_id: string }[]>`
          SELECT DISTINCT user_id COLLATE "C" AS user_id FROM user_memories WHERE user_id COLLATE "C" > ${after}
          ORDER BY 1 LIMIT ${limit + 1}`;
        const page = rows.slice(0, limit).map((r) => r.user_id);
        return { userIds: page, nextCursor: rows.length > limit ? encodeUserIdCursor(page[page.length - 1]) : null };
      }),

    getUserMemory: (userId, id) =>
      run("getUserMemory", async (sql) => {
        const [row] = await sql<
          UserMemoryRow[]
        >`SELECT ${sql.unsafe(COLUMNS)} FROM user_memories WHERE user_id = ${userId} AND id = ${id}`;
        return row ? memoryFromRow(row) : null;
      }),

    listUserMemories: (userId, options = {}) =>
      run("listUserMemories", async (sql) => {
        const limit = memoryPageLimit(options);
        const cursor = options.cursor ? decodeMemoryCursor(options.cursor) : null;
        const rows = cursor
          ? await sql<UserMemoryRow[]>`
              SELECT ${sql.unsafe(COLUMNS)} FROM user_memories WHERE user_id = ${userId} AND (updated_at, id) < (${cursor.updatedAt}, ${cursor.id})
              ORDER BY updated_at DESC, id DESC LIMIT ${limit + 1}`
          : await sql<
              UserMemoryRow[]
            >`SELECT ${sql.unsafe(COLUMNS)} FROM user_memories WHERE user_id = ${userId} ORDER BY updated_at DESC, id DESC LIMIT ${limit + 1}`;
        return memoryPageOf(rows.map(memoryFromRow), limit);
      }),

    updateUserMemory: (userId, id, patch) =>
      run(
        "updateUserMemory",
        (sql) =>
          sql.begin(async (tx) => {
            const t = tx as unknown as PgSql;
            const [row] = await t<
              UserMemoryRow[]
            >`SELECT ${t.unsafe(COLUMNS)} FROM user_memories WHERE user_id = ${userId} AND id = ${id} FOR UPDATE`;
            if (!row) throw notFound(id);
            const next = applyMemoryPatch(memoryFromRow(row), patch);
            await t`
            UPDATE user_memories SET text = ${next.text}, updated_at = ${next.updatedAt}, metadata = ${JSON.stringify(next.metadata)},
              history = ${JSON.stringify(next.history)},
              embedding = CASE WHEN text = ${next.text} THEN embedding END,
              embedding_model = CASE WHEN text = ${next.text} THEN embedding_model END
            WHERE user_id = ${userId} AND id = ${id}`;
            return next;
          }) as Promise<UserMemory>,
      ),

    deleteUserMemory: (userId, id) =>
      run(
        "deleteUserMemory",
        async (sql) => (await sql`DELETE FROM user_memories WHERE user_id = ${userId} AND id = ${id}`).count > 0,
      ),

    deleteUserMemories: (userId) =>
      run("deleteUserMemories", async (sql) => (await sql`DELETE FROM user_memories WHERE user_id = ${userId}`).count),

    putUserMemoryEmbeddings: (userId, model, items) =>
      run("putUserMemoryEmbeddings", async (sql) => {
        if (items.length === 0) return;
        await sql.begin(async (tx) => {
          const t = tx as unknown as PgSql;
          await t`INSERT INTO embedding_models (model, dims) VALUES (${model}, ${items[0].vector.length}) ON CONFLICT DO NOTHING`;
          const [row] = await t<{ dims: number }[]>`SELECT dims FROM embedding_models WHERE model = ${model}`;
          for (const item of items) checkDimensions(model, row?.dims, item.vector.length);
          // Pipelined in the transaction; a memory gone, or whose text changed since, matches no row.
          await Promise.all(
            items.map(
              (item) => t`
                UPDATE user_memories SET embedding_model = ${model}, embedding = ${packVector(normalize(item.vector))}
                WHERE user_id = ${userId} AND id = ${item.id} AND text = ${item.text}`,
            ),
          );
        });
      }),

    missingUserMemoryEmbeddings: (userId, model, limit = 100) =>
      run("missingUserMemoryEmbeddings", (sql) =>
        sql<{ id: string; text: string }[]>`
          SELECT id, text FROM user_memories
          WHERE user_id = ${userId} AND (embedding IS NULL OR embedding_model IS DISTINCT FROM ${model})
          ORDER BY updated_at DESC, id DESC LIMIT ${limit}`.then((rows) =>
          rows.map((r) => ({ id: r.id, text: r.text })),
        ),
      ),

    searchUserMemoryVectors: (query) =>
      run("searchUserMemoryVectors", async (sql) => {
        const [dims] = await sql<{ dims: number }[]>`SELECT dims FROM embedding_models WHERE model = ${query.model}`;
        if (dims === undefined) return [];
        if (dims.dims !== query.vector.length) throw dimensionMismatch(query.model, dims.dims, query.vector.length);
        // One user's vectors (a few hundred, rarely thousands) compared here: see migrations/018-memory-vectors.ts.
        const rows = await sql<{ id: string; text: string; embedding: Buffer }[]>`
          SELECT id, text, embedding FROM user_memories
          WHERE user_id = ${query.userId} AND embedding_model = ${query.model} AND embedding IS NOT NULL`;
        const vectors = new Map(
          rows.map((r) => [r.id, { model: query.model, text: r.text, vector: unpackVector(r.embedding) }]),
        );
        return scanMemoryVectors(rows, (id) => vectors.get(id), query);
      }),
  };
}
