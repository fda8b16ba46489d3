import type { VectorIndexDescription } from "../../core/vector-types.js";
import { validateMessages } from "../../core/messages.js";
import type {
  AppendOptions,
  Message,
  MessageInput,
  SearchQuery,
  ReplaceOptions,
  EmbeddingInput,
  VectorQuery,
  FullStore,
  VectorStore,
  UserMemoryVectorStore,
} from "../../core/types.js";
import { missingVectors, putVectors, searchVectors } from "./_vectors.js";
import { checkHistoryOptions, operationDigest } from "../history.js";
import { sqliteConnection } from "./_connection.js";
import type { SqliteStoreDb } from "./_db.js";
import { BUSY } from "./_group-commit.js";
import { createSqliteIndexer } from "./_indexer.js";
import { createVectorIndexBuilder, type VectorIndexBuilder } from "./_index-builder.js";
import { DEFAULT_RETRAIN_AFTER } from "./_vector-index.js";
import { encodeMessages as encode, messageReads } from "./_messages.js";
import { isFile, type SqliteStoreOptions } from "./_options.js";
import { searchMessages } from "./_search.js";
import { createSearchReader, type SearchReader } from "./_search-reader.js";
import { sessionMethods } from "./_sessions.js";
import { stateMethods } from "./_state.js";
import { summaryMethods } from "./_summaries.js";
import { sqliteTurns } from "./_turn.js";
import { userMemoryMethods } from "./_user-memories.js";
import { checkSearchQuery, DEFAULT_SEARCH_LIMIT } from "../_util.js";

export type { SqliteStoreOptions, SqliteVectorIndexOptions } from "./_options.js";

/** The backend name of the SQLite store. */
export const SQLITE_STORE_NAME = "sqlite";

/** How long a step of an expiry sweep deletes sessions before it lets other work run (ms). */
const EXPIRE_STEP_MS = 10;

/**
 * The embedded store: one SQLite file (WAL), full-text search, turn leases held within this process.
 * The write-ahead log of a file is checkpointed by a worker thread of the store (`backgroundCheckpoints`),
 * so no commit waits for one; durability is the `synchronous` setting's either way.
 * @example
 * ```ts
 * import { createMemory } from "threadkeep";
 * import { createSqliteStore } from "threadkeep/stores/sqlite";
 *
 * const memory = createMemory({ store: createSqliteStore({ path: "./data/threadkeep.db" }) });
 * ```
 */
export function createSqliteStore(options: SqliteStoreOptions): FullStore & VectorStore & UserMemoryVectorStore {
  const conn = sqliteConnection(options, {
    leases: () => turns.leases,
    // Messages a previous process left unindexed (or a migration that rebuilds the index) are
    // indexed in the background, a chunk at a time, rather than all by the first search.
    opened: (db: SqliteStoreDb) => {
      if (db.st.pendingSessions.all(1).length > 0) indexer.schedule();
    },
  });
  const { use, change, grouped, alone } = conn;
  const turns = sqliteTurns(conn, options.crossProcessLease === true);
  const { leases, releaseAfterWrite } = turns;
  // Vector index builds run in a worker thread with a connection of its own (sqlite/_index-builder.ts).
  const builder: VectorIndexBuilder | undefined =
    !isFile(options) || options.vectorIndex === false || options.vectorIndex?.background === false
      ? undefined
      : createVectorIndexBuilder({
          path: options.path,
          busyTimeoutMs: options.busyTimeoutMs ?? 5000,
          retrainAfter: options.vectorIndex?.retrainAfter ?? DEFAULT_RETRAIN_AFTER,
        });
  // Large searches run on a thread with a read-only connection of its own (sqlite/_search-reader.ts).
  const reader: SearchReader | undefined =
    !isFile(options) || options.searchThread === false
      ? undefined
      : createSearchReader({
          path: options.path,
          busyTimeoutMs: options.busyTimeoutMs ?? 5000,
          mmapSizeBytes: options.mmapSizeBytes,
        });
  let closed = false;

  const indexer = createSqliteIndexer(
    (rows) =>
      use((db) => {
        const more = db.tryWrite(() => db.tx.indexPending(rows));
        return more === BUSY ? "busy" : more;
      }),
    () => closed,
    options.fullTextIndexDelayMs ?? 1000,
  );
  const scheduleIndexing = indexer.schedule;

  /** An idempotent append (`seq` undefined) or a tail replacement, as one transaction. */
  const writeHistory = async (id: string, seq: number | undefined, inputs: MessageInput[], options: ReplaceOptions) => {
    const valid = validateMessages(inputs);
    checkHistoryOptions(options, seq);
    const digest = options.operationId === undefined ? "" : operationDigest(seq ?? null, valid);
    const encoded = encode(valid);
    const now = Date.now();
    const stored = await grouped((db) => db.history.write(id, seq, encoded, digest, options, now));
    scheduleIndexing();
    await releaseAfterWrite(id, options);
    return stored;
  };

  return {
    name: SQLITE_STORE_NAME,
    capabilities: {
      persistent: options.path !== ":memory:",
      fullTextSearch: true,
      crossProcessLease: options.crossProcessLease === true,
      nativeExpiry: false,
      vectors: true,
      ownerScope: true,
      combinedTurn: true,
      guardedAppends: true,
      idempotentWrites: true,
    },

    ...sessionMethods(conn, leases),
    ...userMemoryMethods(conn),

    // Not async: each promise layer costs an append microtask turns.
    appendMessages(id: string, inputs: MessageInput[], append: AppendOptions = {}): Promise<Message[]> {
      if (append.operationId !== undefined) return writeHistory(id, undefined, inputs, append);
      let stored: Promise<Message[]>;
      try {
        const encoded = encode(validateMessages(inputs));
        const now = Date.now();
        const write = (db: SqliteStoreDb) => db.tx.append(id, encoded, append, now);
        // A turn's write joins its group; any other runs at once when no group is forming.
        stored = append.fence === undefined ? alone(write) : grouped(write);
      } catch (error) {
        return Promise.reject(error);
      }
      // The indexer's run is a second away, and it runs queued writes first (see use).
      scheduleIndexing();
      if (!append.releaseLease) return stored;
      return stored.then(async (messages) => {
        await releaseAfterWrite(id, append);
        return messages;
      });
    },

    replaceAfter: (id: string, seq: number, inputs: MessageInput[], replace: ReplaceOptions = {}) =>
      writeHistory(id, seq, inputs, replace),

    async listBranches(id) {
      return use((db) => db.history.listBranches(id));
    },

    async switchBranch(id, branchId, switchOptions = {}) {
      const branch = use((db) => db.history.switchBranch(id, branchId, switchOptions.fence, Date.now()));
      scheduleIndexing();
      return branch;
    },

    async saveBranch(id, record) {
      return use((db) => db.history.saveBranch(id, record));
    },

    ...messageReads(conn),
    ...summaryMethods(conn),
    ...stateMethods(conn),

    async putEmbeddings(id: string, model: string, items: EmbeddingInput[]) {
      change((db) => putVectors(db, id, model, items));
    },

    async missingEmbeddings(id: string, model: string, limit = 1000) {
      return use((db) => missingVectors(db, id, model, limit));
    },

    async searchVectors(query: VectorQuery) {
      // A search may write: the index's queued changes, or a newly indexed owner.
      return searchVectors({ read: use, write: change }, query, options.vectorIndex ?? {}, builder && builder.build);
    },

    async describeVectorIndex(): Promise<VectorIndexDescription> {
      // The IVF over sqlite-vec int8 cells, built in a worker thread (or, without a file or with
      // `background: false`, in the calling thread); `vectorIndex: false` searches by exact scan.
      if (options.vectorIndex === false) return { kind: "exact" };
      return { kind: "ivf-sqlite-vec", build: builder ? "worker thread" : "calling thread" };
    },

    async search(query: SearchQuery) {
      checkSearchQuery(query);
      const limit = Math.max(0, Math.floor(query.limit ?? DEFAULT_SEARCH_LIMIT));
      return searchMessages(use, query, limit, reader);
    },

    async expire(olderThan) {
      // In steps of about EXPIRE_STEP_MS, the event loop free between them: one transaction for every
      // expired session held it 1.2 s for 500 sessions of 200 messages (the server's sweep runs this).
      const expired: string[] = [];
      for (;;) {
        const { ids, more } = use((db) => db.tx.expire(olderThan, EXPIRE_STEP_MS));
        for (const id of ids) leases.forget(id);
        expired.push(...ids);
        if (!more) return expired;
        await new Promise((resolve) => setImmediate(resolve));
      }
    },

    ...turns.methods,

    async close() {
      if (closed) return;
      conn.stop();
      closed = true;
      indexer.cancel();
      leases.clear();
      // The workers' connections go first, so closing the store's own checkpoints and removes the log.
      await builder?.close();
      await reader?.close();
      // Messages still waiting for the full-text index stay waiting. Indexing them here in one call
      // held the event loop ~11 s per million (the backlog an upgrade leaves), and in steps it would
      // delay the close by as much, for nothing: each session's watermark (fts_seq) and the
      // indexer's queue (fts_queue) are in the file, so the next open starts the background indexer on what waits, and a search
      // before it is done indexes what it can match first. Nothing is lost, and a close is prompt.
      await conn.close();
    },
  };
}
