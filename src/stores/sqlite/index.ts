import {
  SessionNotFoundError,
  StateConflictError,
  StoreUnavailableError,
  ThreadkeepError,
} from "../../core/errors.js";
import { validateMessages } from "../../core/messages.js";
import type {
  AppendOptions,
  Message,
  MessageInput,
  MessageQuery,
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
import { LocalLeases } from "../_lease.js";
import { HeldLeases } from "../_held-leases.js";
import { readTurn, withLease } from "../../core/open-turn.js";
import { SqliteFileLeases, type TurnLeases } from "./_lease.js";
import { BACKSTOP_PAGES, type Checkpointer, createCheckpointer } from "./_checkpointer.js";
import { openSqliteStoreDb, type SqliteStoreDb } from "./_db.js";
import { storeError } from "./_errors.js";
import { GroupCommit } from "./_group-commit.js";
import { createSqliteIndexer } from "./_indexer.js";
import { createVectorIndexBuilder, type VectorIndexBuilder } from "./_index-builder.js";
import { DEFAULT_RETRAIN_AFTER } from "./_vector-index.js";
import { encodeMessages as encode, readMessages } from "./_messages.js";
import type { SqliteStoreOptions } from "./_options.js";
import { searchMessages } from "./_search.js";
import { sqliteUserMemories, type SqliteUserMemories } from "./_user-memories.js";
import { checkSearchQuery, DEFAULT_LIST_LIMIT, DEFAULT_SEARCH_LIMIT, decodeCursor, encodeCursor } from "../_util.js";

export type { SqliteStoreOptions, SqliteVectorIndexOptions } from "./_options.js";

/** The backend name of the SQLite store. */
export const SQLITE_STORE_NAME = "sqlite";

/**
 * The embedded store: one SQLite file (WAL), full-text search, turn leases held within this process.
 * The write-ahead log of a file is checkpointed by a worker thread of the store (`backgroundCheckpoints`),
 * so no commit waits for one; durability is the `synchronous` setting's either way.
 */
export function createSqliteStore(options: SqliteStoreOptions): FullStore & VectorStore & UserMemoryVectorStore {
  let closed = false;
  let opened: SqliteStoreDb | undefined;
  const synchronous = options.synchronous ?? "normal";
  // A file's log is checkpointed by a worker thread, not inside a commit (see sqlite/_checkpointer.ts).
  const checkpointer: Checkpointer | undefined =
    options.path === ":memory:" || options.path === "" || options.backgroundCheckpoints === false
      ? undefined
      : createCheckpointer({
          path: options.path,
          synchronous,
          onLost: (error) => {
            console.warn(`[threadkeep] sqlite: the checkpoint worker stopped (${error.message}); commits checkpoint again`);
            try {
              if (opened && !closed) opened.db.pragma("wal_autocheckpoint = 1000");
            } catch {
              // A closing connection: nothing left to checkpoint for.
            }
          },
        });
  const wrote = () => checkpointer?.wrote();
  // Vector index builds run in a worker thread with a connection of its own (sqlite/_index-builder.ts).
  const builder: VectorIndexBuilder | undefined =
    options.path === ":memory:" || options.path === "" || options.vectorIndex === false || options.vectorIndex?.background === false
      ? undefined
      : createVectorIndexBuilder({
          path: options.path,
          busyTimeoutMs: options.busyTimeoutMs ?? 5000,
          retrainAfter: options.vectorIndex?.retrainAfter ?? DEFAULT_RETRAIN_AFTER,
        });
  let memoryCalls: SqliteUserMemories | undefined;
  /** The memory statements, prepared on first use. */
  const memories = (db: SqliteStoreDb) => (memoryCalls ??= sqliteUserMemories(db.db));

  /**
   * Runs `fn` on the database, opening it on first use; driver failures become coded errors. Appends
   * still queued for their group commit run first, so every call sees the writes issued before it.
   */
  function use<T>(fn: (db: SqliteStoreDb) => T): T {
    appends.flush();
    return useNow(fn);
  }

  function useNow<T>(fn: (db: SqliteStoreDb) => T): T {
    if (closed) throw new StoreUnavailableError("The sqlite store is closed");
    try {
      if (!opened) {
        opened = openSqliteStoreDb(
          {
            path: options.path,
            busyTimeoutMs: options.busyTimeoutMs ?? 5000,
            synchronous,
            mmapSizeBytes: options.mmapSizeBytes ?? 0,
            walAutocheckpointPages: checkpointer ? BACKSTOP_PAGES : undefined,
          },
          leases,
          wrote,
        );
        // Messages a previous process left unindexed (or a migration that rebuilds the index) are
        // indexed in the background, a chunk at a time, rather than all by the first search.
        if (opened.st.pendingSessions.all(1).length > 0) indexer.schedule();
      }
      return fn(opened);
    } catch (error) {
      throw storeError(error);
    }
  }

  /** {@link use} for a write that commits outside the store's transactions (one statement). */
  function change<T>(fn: (db: SqliteStoreDb) => T): T {
    const result = use(fn);
    wrote();
    return result;
  }

  // Processes sharing the file: a write that finds the lock taken is tried again with the event loop
  // free, instead of the whole process sleeping in SQLite's busy handler (1 ms and up, each time).
  const shared = options.crossProcessLease === true;
  const tryNow = <T>(fn: (db: SqliteStoreDb) => T) => useNow((db) => db.tryWrite(() => fn(db)));
  const appends = new GroupCommit<SqliteStoreDb>({
    use: useNow,
    tryUse: shared ? tryNow : undefined,
    batch: (db, writes) => db.tx.batch(writes),
    toError: storeError,
  });
  /** Queues a message write for the group commit (a closed store refuses it at once). */
  const grouped = <T>(fn: (db: SqliteStoreDb) => T): Promise<T> => {
    if (closed) throw new StoreUnavailableError("The sqlite store is closed");
    return appends.add(fn);
  };
  /** {@link grouped} for a write outside a turn: at once when no group is forming. */
  const alone = <T>(fn: (db: SqliteStoreDb) => T): Promise<T> => {
    if (closed) throw new StoreUnavailableError("The sqlite store is closed");
    return appends.addNow(fn);
  };
  const leases: TurnLeases = shared
    ? new SqliteFileLeases(
        (fn) => use((db) => fn(db.db)),
        (fn) => use((db) => db.tryWrite(() => fn(db.db))),
        (fn) => grouped((db) => fn(db.db)),
      )
    : new LocalLeases();
  const held = new HeldLeases();
  /** After a committed write with `releaseLease`: a file lease was given back in its transaction already. */
  const releaseAfterWrite = (id: string, write: AppendOptions) => {
    if (write.releaseLease && write.fence !== undefined) leases.releasedByWrite?.(id, write.fence);
    return held.releaseAfterWrite(id, write);
  };

  const indexer = createSqliteIndexer(
    (rows) => use((db) => db.tx.indexPending(rows)),
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

    async addUserMemory(input) {
      return change((db) => memories(db).add(input));
    },

    async listMemoryOwners(listOptions) {
      return use((db) => memories(db).owners(listOptions));
    },

    async getUserMemory(userId, id) {
      return use((db) => memories(db).get(userId, id));
    },

    async listUserMemories(userId, listOptions) {
      return use((db) => memories(db).list(userId, listOptions));
    },

    async updateUserMemory(userId, id, patch) {
      return change((db) => memories(db).update(userId, id, patch));
    },

    async deleteUserMemory(userId, id) {
      return change((db) => memories(db).delete(userId, id));
    },

    async deleteUserMemories(userId) {
      return change((db) => memories(db).deleteAll(userId));
    },

    async putUserMemoryEmbeddings(userId, model, items) {
      return change((db) => memories(db).putEmbeddings(userId, model, items));
    },

    async missingUserMemoryEmbeddings(userId, model, limit = 100) {
      return use((db) => memories(db).missingEmbeddings(userId, model, limit));
    },

    async searchUserMemoryVectors(query) {
      return use((db) => memories(db).searchVectors(query));
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
        if (db.st.setMetadata.run(JSON.stringify(metadata), id).changes === 0)
          throw new SessionNotFoundError(id);
        return db.session(db.st.getSession.get(id)!);
      });
    },

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
      const branch = use((db) =>
        db.history.switchBranch(id, branchId, switchOptions.fence, Date.now()),
      );
      scheduleIndexing();
      return branch;
    },

    async saveBranch(id, record) {
      return use((db) => db.history.saveBranch(id, record));
    },

    async getMessages(id: string, query: MessageQuery = {}) {
      return use((db) => readMessages(db, id, query));
    },

    async countMessages(id) {
      return use(({ st }) => st.countMessages.get(id)!.n);
    },

    async popMessage(id) {
      return use((db) => db.tx.pop(id));
    },

    async truncateAfter(id, seq) {
      return use((db) => db.tx.truncate(id, seq));
    },

    async saveSummary(id, input) {
      return use((db) => db.tx.saveSummary(id, input));
    },

    async listSummaries(id) {
      return use((db) => db.summaries(id));
    },

    async getState(id) {
      return use((db) => db.state(id));
    },

    async setState(id, data, expectedVersion) {
      return change(({ st }) => {
        const json = JSON.stringify(data);
        if (st.setState.run(json, id, expectedVersion).changes === 0) {
          const row = st.getState.get(id);
          if (!row) throw new SessionNotFoundError(id);
          throw new StateConflictError(expectedVersion, row.state_version);
        }
        return { version: expectedVersion + 1, data: JSON.parse(json) };
      });
    },

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

    async search(query: SearchQuery) {
      checkSearchQuery(query);
      const limit = Math.max(0, Math.floor(query.limit ?? DEFAULT_SEARCH_LIMIT));
      return searchMessages(use, query, limit);
    },

    async expire(olderThan) {
      const ids = use((db) => db.tx.expire(olderThan));
      for (const id of ids) leases.forget(id);
      return ids;
    },

    async acquireLease(id, lease) {
      if (closed) throw new StoreUnavailableError("The sqlite store is closed");
      return held.track(await leases.acquire(id, lease));
    },

    async openTurn(id, opening) {
      if (closed) throw new StoreUnavailableError("The sqlite store is closed");
      // The owner check and every read in one synchronous step, which nothing interleaves; with the
      // lease in the file, in the grant's own transaction.
      const read = () =>
        use((db) =>
          db.read(() => {
            const row = db.st.getSessionWithState.get(id);
            return readTurn(row ? db.session(row) : null, opening, (session) => ({
              status: "ok" as const,
              session,
              messages: opening.last > 0 ? db.messages(id, db.st.newest(id, Math.floor(opening.last)).reverse()) : [],
              summaries: db.summaries(id),
              state: db.stateOf(id, row!),
            }));
          }),
        );
      if (!leases.acquireAndRead) return withLease(held.track(await leases.acquire(id, opening.lease)), read);
      const granted = await leases.acquireAndRead(id, opening.lease, read);
      const outcome = granted.read!;
      return withLease(held.track(granted.lease), () => {
        if (!outcome.ok) throw outcome.error;
        return outcome.value;
      });
    },

    async close() {
      if (closed) return;
      // Appends issued before the close are written, as they would have been without the grouping.
      appends.flush();
      closed = true;
      indexer.cancel();
      leases.clear();
      // The workers' connections go first, so closing the store's own checkpoints and removes the log.
      await builder?.close();
      await checkpointer?.close();
      // Messages still waiting for the full-text index stay waiting. Indexing them here in one call
      // held the event loop ~11 s per million (the backlog an upgrade leaves), and in steps it would
      // delay the close by as much, for nothing: each session's watermark (fts_seq) and the
      // indexer's queue (fts_queue) are in the file, so the next open starts the background indexer on what waits, and a search
      // before it is done indexes what it can match first. Nothing is lost, and a close is prompt.
      opened?.close();
      opened = undefined;
    },
  };
}
