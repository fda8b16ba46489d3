/**
 * The SQLite store's connection: the file opened on first use, its write-ahead log checkpointed by a
 * worker thread (so no commit waits for one), and the message writes of turns gathered into group
 * commits. Driver failures become coded errors.
 */
import { StoreUnavailableError } from "../../core/errors.js";
import { BACKSTOP_PAGES, type Checkpointer, createCheckpointer } from "./_checkpointer.js";
import { openSqliteStoreDb, type SqliteStoreDb } from "./_db.js";
import { storeError } from "./_errors.js";
import { GroupCommit } from "./_group-commit.js";
import type { TurnLeases } from "./_lease.js";
import { isFile, type SqliteStoreOptions } from "./_options.js";

/** Runs a step on the open database. */
export type SqliteUse = <T>(fn: (db: SqliteStoreDb) => T) => T;
/** Queues a step for a group commit. */
export type SqliteQueue = <T>(fn: (db: SqliteStoreDb) => T) => Promise<T>;

/** What the store's parts use of the connection. */
export interface SqliteConnection {
  /**
   * Runs `fn` on the database, opening it on first use. Appends still queued for their group commit
   * run first, so every call sees the writes issued before it.
   */
  use: SqliteUse;
  /** {@link use} for a write that commits outside the store's transactions (one statement). */
  change: SqliteUse;
  /** Queues a message write for the group commit (a closed store refuses it at once). */
  grouped: SqliteQueue;
  /** {@link grouped} for a write outside a turn: at once when no group is forming. */
  alone: SqliteQueue;
  /** Throws `store_unavailable` once the store is closed. */
  checkOpen(): void;
  /** Writes what is queued and refuses every later call; {@link close} then closes the file. */
  stop(): void;
  /** Closes the checkpoint worker, then the file (after {@link stop}). */
  close(): Promise<void>;
}

/** What the connection needs of the rest of the store. */
export interface SqliteConnectionHooks {
  /** The store's turn leases (the database takes them when it opens). */
  leases(): TurnLeases;
  /** Called once the file is open, before its first use. */
  opened(db: SqliteStoreDb): void;
}

/** The connection of a SQLite store; nothing is opened before its first use. */
export function sqliteConnection(options: SqliteStoreOptions, hooks: SqliteConnectionHooks): SqliteConnection {
  let closed = false;
  let opened: SqliteStoreDb | undefined;
  const synchronous = options.synchronous ?? "normal";
  // A file's log is checkpointed by a worker thread, not inside a commit (see sqlite/_checkpointer.ts).
  const checkpointer: Checkpointer | undefined =
    !isFile(options) || options.backgroundCheckpoints === false
      ? undefined
      : createCheckpointer({
          path: options.path,
          synchronous,
          onLost: (error) => {
            console.warn(
              `[threadkeep] sqlite: the checkpoint worker stopped (${error.message}); commits checkpoint again`,
            );
            try {
              if (opened && !closed) opened.db.pragma("wal_autocheckpoint = 1000");
            } catch {
              // A closing connection: nothing left to checkpoint for.
            }
          },
        });
  const wrote = () => checkpointer?.wrote();
  const checkOpen = () => {
    if (closed) throw new StoreUnavailableError("The sqlite store is closed");
  };

  function useNow<T>(fn: (db: SqliteStoreDb) => T): T {
    checkOpen();
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
          hooks.leases(),
          wrote,
        );
        hooks.opened(opened);
      }
      return fn(opened);
    } catch (error) {
      throw storeError(error);
    }
  }

  // Processes sharing the file: a write that finds the lock taken is tried again with the event loop
  // free, instead of the whole process sleeping in SQLite's busy handler (1 ms and up, each time).
  const tryNow = <T>(fn: (db: SqliteStoreDb) => T) => useNow((db) => db.tryWrite(() => fn(db)));
  const appends = new GroupCommit<SqliteStoreDb>({
    use: useNow,
    tryUse: options.crossProcessLease === true ? tryNow : undefined,
    batch: (db, writes) => db.tx.batch(writes),
    toError: storeError,
  });

  const use: SqliteUse = (fn) => {
    appends.flush();
    return useNow(fn);
  };

  return {
    use,
    change: (fn) => {
      const result = use(fn);
      wrote();
      return result;
    },
    grouped: (fn) => {
      checkOpen();
      return appends.add(fn);
    },
    alone: (fn) => {
      checkOpen();
      return appends.addNow(fn);
    },
    checkOpen,
    stop() {
      // Appends issued before the close are written, as they would have been without the grouping.
      appends.flush();
      closed = true;
    },
    async close() {
      // The worker's connection goes first, so closing the store's own checkpoints and removes the log.
      await checkpointer?.close();
      opened?.close();
      opened = undefined;
    },
  };
}
