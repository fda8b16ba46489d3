import type { SqliteVectorIndexOptions } from "./_vector-index.js";

export type { SqliteVectorIndexOptions } from "./_vector-index.js";

/** Options of {@link createSqliteStore}. */
export interface SqliteStoreOptions {
  /** The database file; missing parent directories are created. `:memory:` keeps the data in this process only. */
  path: string;
  /** How long a write waits for another connection's lock before failing with `store_unavailable`. @default 5000 */
  busyTimeoutMs?: number;
  /**
   * `normal`: with WAL, a commit survives a process crash but the last ones may be lost on power loss;
   * `full`: every commit is synced to disk first (slower appends).
   * @default "normal"
   */
  synchronous?: "normal" | "full";
  /**
   * Bytes of the file to read through memory mapping (SQLite `mmap_size`): about 10% faster reads of
   * large databases (docs/decisions/0001-sqlite-schema.md), but a disk read error then crashes the process with SIGBUS
   * instead of failing one call with `store_unavailable`. 0 turns it off.
   * @default 0
   */
  mmapSizeBytes?: number;
  /**
   * New messages reach the full-text index in batches, this long after an append (a full-text search
   * indexes whatever is waiting first, so it never misses a message).
   * @default 1000
   */
  fullTextIndexDelayMs?: number;
  /**
   * Keep turn leases in the database file, so several processes sharing it (`threadkeep serve
   * --workers N`, or several servers on one machine) run a session's turns one at a time, in arrival
   * order. Costs a proxied turn one small write transaction more (the grant, which also reads the turn;
   * the release rides on the turn's commit); off, leases hold within this process only.
   * @default false
   */
  crossProcessLease?: boolean;
  /**
   * Checkpoint the write-ahead log in a worker thread of the store (started at the 200th write), so no
   * commit copies the log into the database file. Off, a commit checkpoints whenever the log passes
   * 1,000 pages (SQLite's default): 10–20 ms in about one append of a hundred (docs/decisions/0001-sqlite-schema.md).
   * @default true
   */
  backgroundCheckpoints?: boolean;
  /**
   * Run a search that may read more than 10,000 messages (of one session, or of all of an owner's
   * sessions; an owner's substring search always) on a worker thread of the store with a read-only
   * connection of its own (started by the first such search), so the event loop is free while one
   * statement reads every matching message: 80–160 ms at 100,000 messages on the store's thread,
   * about 1.5 s at a million. Smaller searches stay on the store's thread, where they cost less than
   * the trip to the thread and back (~0.2–0.3 ms). Off (and for `:memory:`), every search runs on the
   * store's thread.
   * @default true
   */
  searchThread?: boolean;
  /**
   * Semantic search of a large owner (one with `minOwnerVectors` embeddings or more of a model) goes
   * through an IVF index: the owner's vectors split into about √n k-means cells, kept as int8 in
   * `sqlite-vec`; a search reads the `probes` nearest cells only and re-scores their `candidates`
   * exactly. Smaller owners, and searches within one session, scan every vector. `false` scans every
   * vector always. Where sqlite-vec has no binary for the platform, every search scans (with one warning).
   * Builds and retraining run in a worker thread (`background`), never on the event loop.
   * @default { minOwnerVectors: 5000, probes: 8, minProbedVectors: 3000, candidates: 64, retrainAfter: 2, background: true }
   */
  vectorIndex?: SqliteVectorIndexOptions | false;
}

/** Whether `options` name a file (not an in-memory database), so a worker thread's connection can open it too. */
export const isFile = (options: Pick<SqliteStoreOptions, "path">) => options.path !== ":memory:" && options.path !== "";
