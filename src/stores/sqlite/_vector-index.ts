/**
 * The SQLite store's approximate nearest-neighbour index over large owners' embeddings: an IVF
 * (inverted file) index. Each indexed owner's vectors of a model are split into cells by spherical
 * k-means (about √n cells of about √n vectors, trained on a sample, stores/_kmeans.ts); each vector is
 * kept as int8 in a `sqlite-vec` `vec0` table per model, partitioned by owner and cell. A search scores
 * the owner's centroids, asks sqlite-vec for the nearest vectors of the `probes` nearest cells only (an
 * int8 scan in C of a few thousand vectors, not the owner's million), and re-scores those candidates
 * exactly with their float32 vectors from `message_vectors`, which stay the source of truth. The index
 * is a cache of those rows:
 *
 * - It holds only owners whose vectors of a model passed `minOwnerVectors` in an exact scan
 *   (`vector_index_owners`, with the centroids); smaller owners are scanned exactly, which is faster.
 * - Ordinary triggers on `message_vectors` (no virtual table in them, so a process that cannot load the
 *   extension writes as before) queue what changed: `vector_index_queue` (vectors added or replaced for
 *   an indexed owner) and `vector_index_gone` (index rows whose vector went: truncation, deletion,
 *   expiry, erasure, a replaced vector). The queues are applied before each indexed search and after
 *   each write of vectors, in the caller's transaction, so every write path, every process and a
 *   restart leave the index consistent. A vector added after training goes to its nearest cell; an
 *   owner grown to twice the vectors it was trained on is trained again after the search that noticed
 *   (`retrainAfter`), off that search's path. An owner left without vectors (erased) loses its
 *   centroids too: they are averages of its vectors.
 * - A build (first or again) is planned without a write lock, the training and every vector's cell
 *   computed from a read ({@link planOwnerIndex}), then written beside the published cells under a
 *   build id of its own, in transactions of about a millisecond, and published by one small
 *   transaction that points the owner row at it ({@link writeOwnerIndex}): another connection's write
 *   waits for one of those, never for the whole build. A file's store does both in a worker thread
 *   with its own connection (sqlite/_index-builder.ts), so the event loop is never held by a build;
 *   searches meanwhile scan exactly, or use the earlier cells (docs/decisions/0006-vector-index-builds.md).
 * - A candidate is returned only when its row in `message_vectors` is still the owner's, of the model,
 *   of a session active since `activeSince`; a search whose candidates were thinned below its limit by
 *   that filter is answered by the exact scan instead.
 *
 * The objects are created on first use (IF NOT EXISTS), not by a schema migration: a database whose
 * owners never grow large never gets them, and the virtual tables need the extension loaded. A file
 * holding an index of an earlier layout (the binary one: sign bits, no centroids; or cells without
 * build ids) has it dropped and rebuilt as owners are searched.
 */
import type Database from "better-sqlite3";
import * as sqliteVec from "sqlite-vec";
import { activeSinceSql } from "./_activity.js";
import { Cells, quantize, scaleOf, trainCells, uniform } from "../_kmeans.js";

/** How the index is used; `false` turns it off (every search scans exactly). */
export interface SqliteVectorIndexOptions {
  /**
   * An owner's vectors of a model are indexed once an exact scan of them counted at least this many
   * (smaller owners are scanned exactly, which is faster there; docs/benchmarks/vectors.md).
   * @default 5000
   */
  minOwnerVectors?: number;
  /**
   * Cells searched per query (the nearest by centroid; more when needed to read `minProbedVectors`).
   * More is slower and closer to the exact scan: docs/benchmarks/vectors.md has recall@10 and
   * latency for each (at a million clustered vectors: 8 give recall@10 0.99 for ~41 ms of CPU).
   * @default 8
   */
  probes?: number;
  /**
   * Vectors a search reads at least, in whole cells, whatever `probes` says: a smaller owner's cells
   * are small, so this costs little there, and finds its farther neighbours, spread over many cells
   * (recall@10 0.94 → 0.97 at 10,000 vectors on the benchmark's data).
   * @default 3000
   */
  minProbedVectors?: number;
  /**
   * Candidates re-scored exactly per search (at least the search's `limit`): the nearest by int8
   * distance among twice the limit taken from each probed cell.
   * @default 64
   */
  candidates?: number;
  /**
   * An indexed owner whose vectors reach this many times those its cells were trained on is trained
   * again, after the search that noticed (vectors added in between go to their nearest cell).
   * @default 2
   */
  retrainAfter?: number;
  /**
   * Build and retrain in a worker thread with its own connection, so the event loop is never held
   * by a build (a minute of CPU at 100,000 vectors of 768 dimensions); searches meanwhile scan
   * exactly or use the earlier cells. `false` builds in the calling thread: the first build inside
   * the search that found the owner large, a retraining right after one. A `:memory:` store, which a
   * worker cannot open, always builds in its thread.
   * @default true
   */
  background?: boolean;
}

export const DEFAULT_MIN_OWNER_VECTORS = 5_000;
export const DEFAULT_PROBES = 8;
export const DEFAULT_MIN_PROBED = 3_000;
export const DEFAULT_CANDIDATES = 64;
export const DEFAULT_RETRAIN_AFTER = 2;
/** sqlite-vec's largest `k`. */
const MAX_K = 4096;
/** Training vectors per cell (a sample, not the owner's million). */
const SAMPLE_PER_CELL = 24;
/** Slots per vec0 chunk: a cell's vectors live in whole chunks, so small chunks waste less on small cells. */
const CHUNK_SIZE = 128;

/** The connections the extension loaded into (true) or failed to load into (false). */
const loaded = new WeakMap<Database.Database, boolean>();
let warned = false;

/** Loads sqlite-vec into the connection once; false (with one warning) where no binary is installed. */
export function loadVectorExtension(db: Database.Database): boolean {
  let ok = loaded.get(db);
  if (ok === undefined) {
    try {
      sqliteVec.load(db);
      ok = true;
    } catch (error) {
      ok = false;
      if (!warned) {
        warned = true;
        console.warn(
          `[threadkeep] sqlite: sqlite-vec could not be loaded (${(error as Error).message}); semantic search scans every vector`,
        );
      }
    }
    loaded.set(db, ok);
  }
  return ok;
}

function unpack(packed: Uint8Array): Float32Array {
  const copy = new Uint8Array(packed.byteLength);
  copy.set(packed);
  return new Float32Array(copy.buffer);
}

const BASE_SCHEMA = `
  CREATE TABLE IF NOT EXISTS vector_index_owners (
    model TEXT NOT NULL, user_id TEXT NOT NULL, generation INTEGER NOT NULL, trained INTEGER NOT NULL,
    size INTEGER NOT NULL, scale REAL NOT NULL, centroids BLOB NOT NULL, build INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (model, user_id));
  CREATE TABLE IF NOT EXISTS vector_index_builds (
    id INTEGER PRIMARY KEY AUTOINCREMENT, model TEXT NOT NULL, user_id TEXT NOT NULL, trained INTEGER NOT NULL,
    size INTEGER NOT NULL, scale REAL NOT NULL, centroids BLOB NOT NULL, touched_at INTEGER NOT NULL DEFAULT 0);
  CREATE INDEX IF NOT EXISTS vector_index_builds_owner ON vector_index_builds (user_id, model);
  CREATE TABLE IF NOT EXISTS vector_index_rows (
    id INTEGER PRIMARY KEY, session_id TEXT NOT NULL, seq INTEGER NOT NULL, model TEXT NOT NULL, user_id TEXT NOT NULL,
    build INTEGER NOT NULL DEFAULT 0, UNIQUE (session_id, seq, build));
  CREATE INDEX IF NOT EXISTS vector_index_rows_owner ON vector_index_rows (user_id, model, build);
  CREATE TABLE IF NOT EXISTS vector_index_queue (session_id TEXT NOT NULL, seq INTEGER NOT NULL, PRIMARY KEY (session_id, seq)) WITHOUT ROWID;
  CREATE TABLE IF NOT EXISTS vector_index_gone (id INTEGER PRIMARY KEY);
  CREATE TRIGGER IF NOT EXISTS message_vectors_index_insert AFTER INSERT ON message_vectors
    WHEN EXISTS (SELECT 1 FROM sessions s JOIN vector_index_owners o ON o.user_id = s.user_id AND o.model = new.model WHERE s.id = new.session_id)
      OR EXISTS (SELECT 1 FROM sessions s JOIN vector_index_builds b ON b.user_id = s.user_id AND b.model = new.model WHERE s.id = new.session_id)
  BEGIN
    INSERT OR IGNORE INTO vector_index_queue (session_id, seq) VALUES (new.session_id, new.seq);
  END;
  CREATE TRIGGER IF NOT EXISTS message_vectors_index_update AFTER UPDATE ON message_vectors BEGIN
    INSERT OR IGNORE INTO vector_index_gone SELECT id FROM vector_index_rows WHERE session_id = old.session_id AND seq = old.seq;
    INSERT OR IGNORE INTO vector_index_queue (session_id, seq)
      SELECT new.session_id, new.seq WHERE EXISTS (SELECT 1 FROM sessions s JOIN vector_index_owners o ON o.user_id = s.user_id AND o.model = new.model WHERE s.id = new.session_id)
        OR EXISTS (SELECT 1 FROM sessions s JOIN vector_index_builds b ON b.user_id = s.user_id AND b.model = new.model WHERE s.id = new.session_id);
  END;
  CREATE TRIGGER IF NOT EXISTS message_vectors_index_delete AFTER DELETE ON message_vectors BEGIN
    INSERT OR IGNORE INTO vector_index_gone SELECT id FROM vector_index_rows WHERE session_id = old.session_id AND seq = old.seq;
  END;
`;

/** Whether the index's tables exist in this file (created by the first owner indexed). */
function hasIndex(db: Database.Database): boolean {
  return (
    db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'vector_index_owners'").get() !== undefined
  );
}

/**
 * Drops an index of an earlier layout: the binary one (its owners table has no centroids), or cells
 * written in one transaction (no build ids, so no room for a build beside the published one). A
 * cache, rebuilt as owners are searched.
 */
function dropEarlierIndex(db: Database.Database): void {
  const earlier = () => {
    const columns = db.prepare("SELECT name FROM pragma_table_info('vector_index_owners')").pluck().all() as string[];
    return columns.length > 0 && !columns.includes("build");
  };
  if (!earlier()) return;
  db.transaction(() => {
    // Looked at again under the write lock: another process (or store) on the file may have dropped
    // the earlier index between the look above and this transaction, and created the new one.
    if (!earlier()) return;
    const tables = db
      .prepare(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND (name GLOB 'vector_index_m[0-9]*' OR name GLOB 'vector_index_ivf[0-9]*') AND sql LIKE 'CREATE VIRTUAL TABLE%'",
      )
      .pluck()
      .all() as string[];
    for (const name of tables) db.exec(`DROP TABLE "${name}"`);
    db.exec(`
      DROP TRIGGER IF EXISTS message_vectors_index_insert; DROP TRIGGER IF EXISTS message_vectors_index_update;
      DROP TRIGGER IF EXISTS message_vectors_index_delete; DROP TABLE IF EXISTS vector_index_owners;
      DROP TABLE IF EXISTS vector_index_rows; DROP TABLE IF EXISTS vector_index_queue; DROP TABLE IF EXISTS vector_index_gone;
      DROP TABLE IF EXISTS vector_index_builds;`);
  }).immediate();
}

/** Cells of one build (published or being written): its id and the keys of its partitions. */
interface Target {
  build: number;
  scale: number;
  cells: Cells;
}

/** An indexed owner's cells as this process last read them. */
interface Owner extends Target {
  generation: number;
  trained: number;
  size: number;
}

/**
 * A cell's partition key in the vec0 table: the build's id times this, plus the cell. A build is
 * written under its own keys, which no search asks for until the owner row names that build.
 */
const CELL_SPAN = 2 ** 20;
const cellKey = (target: Target, cell: number) => BigInt(target.build) * BigInt(CELL_SPAN) + BigInt(cell);

/**
 * A registered build whose writer has not written for this long is taken for dead (its worker or
 * process killed) and may be superseded; one written to more recently holds the owner's claim. A
 * writer touches its registration with every transaction (about every 5 ms; step 3's read of the
 * owner's keys, outside a transaction, takes seconds at a million vectors).
 */
export const STALE_BUILD_MS = 60_000;

function prepare(db: Database.Database) {
  dropEarlierIndex(db);
  db.exec(BASE_SCHEMA);
  // Registrations of a file indexed before builds were touched: none holds a claim (the default, 0).
  const buildColumns = db.prepare("SELECT name FROM pragma_table_info('vector_index_builds')").pluck().all();
  if (!buildColumns.includes("touched_at")) {
    db.exec("ALTER TABLE vector_index_builds ADD COLUMN touched_at INTEGER NOT NULL DEFAULT 0");
  }
  const tables = new Map<string, { insert: Database.Statement; remove: Database.Statement; knn: Database.Statement }>();
  // The candidates' stored vectors, for the owner's sessions active since a time (the exact filter runs
  // on the few candidates, not on the index).
  const candidates = db
    .prepare(
      `SELECT v.session_id, v.seq, v.created_at, v.vector, s.user_id = ? AND v.model = ? AND ${activeSinceSql("s")} AS live
       FROM vector_index_rows r JOIN message_vectors v ON v.session_id = r.session_id AND v.seq = r.seq
       JOIN sessions s ON s.id = v.session_id WHERE r.id IN (SELECT value FROM json_each(?))`,
    )
    .raw();
  const modelRow = db.prepare("SELECT rowid, dims FROM embedding_models WHERE model = ?");
  const dimsOf = (model: string) => {
    const row = modelRow.get(model) as { rowid: number; dims: number } | undefined;
    if (!row) throw new Error(`No dimensions recorded for embedding model ${model}`);
    return row;
  };
  /** The model's vec0 table and its statements (created on first use). */
  const table = (model: string) => {
    let t = tables.get(model);
    if (!t) {
      const { rowid, dims } = dimsOf(model);
      const name = `vector_index_ivf${rowid}`;
      db.exec(
        `CREATE VIRTUAL TABLE IF NOT EXISTS ${name} USING vec0(user_id TEXT PARTITION KEY, cell INTEGER PARTITION KEY, v INT8[${dims}], chunk_size=${CHUNK_SIZE})`,
      );
      t = {
        insert: db.prepare(`INSERT INTO ${name} (rowid, user_id, cell, v) VALUES (?, ?, ?, vec_int8(?))`),
        remove: db.prepare(`DELETE FROM ${name} WHERE rowid = ?`),
        // The nearest `k` of each probed cell by int8 distance (sqlite-vec runs the KNN once per value of
        // the IN list); comparable across cells, so the best of them all are re-scored.
        knn: db
          .prepare(
            `SELECT rowid, distance FROM ${name} WHERE v MATCH vec_int8(?) AND k = ? AND user_id = ? AND cell IN (SELECT value FROM json_each(?))`,
          )
          .raw(),
      };
      tables.set(model, t);
    }
    return t;
  };
  const ownerHead = db
    .prepare("SELECT generation, trained, size FROM vector_index_owners WHERE model = ? AND user_id = ?")
    .raw();
  const ownerBody = db
    .prepare("SELECT scale, centroids, build FROM vector_index_owners WHERE model = ? AND user_id = ?")
    .raw();
  const cache = new Map<string, Owner>();
  /** The owner's cells, read again only when another generation was trained (by any process). */
  const owner = (model: string, userId: string): Owner | undefined => {
    const key = `${model}\n${userId}`;
    const head = ownerHead.get(model, userId) as [number, number, number] | undefined;
    if (!head) {
      cache.delete(key);
      return undefined;
    }
    let o = cache.get(key);
    if (!o || o.generation !== head[0]) {
      const [scale, centroids, build] = ownerBody.get(model, userId) as [number, Buffer, number];
      o = {
        generation: head[0],
        trained: head[1],
        size: head[2],
        build,
        scale,
        cells: new Cells(unpack(centroids), dimsOf(model).dims),
      };
      cache.set(key, o);
    }
    o.trained = head[1];
    o.size = head[2];
    return o;
  };
  const buildsOfOwner = db.prepare("SELECT id FROM vector_index_builds WHERE model = ? AND user_id = ?").pluck();
  const buildBody = db.prepare("SELECT scale, centroids FROM vector_index_builds WHERE id = ?").raw();
  // A build's cells never change once registered: read once per process.
  const buildCache = new Map<number, Target>();
  /** The builds being written for the owner (usually none), with their cells. */
  const builds = (model: string, userId: string): Target[] =>
    (buildsOfOwner.all(model, userId) as number[]).flatMap((build) => {
      let target = buildCache.get(build);
      if (!target) {
        const body = buildBody.get(build) as [number, Buffer] | undefined;
        if (!body) return [];
        target = { build, scale: body[0], cells: new Cells(unpack(body[1]), dimsOf(model).dims) };
        buildCache.set(build, target);
      }
      return [target];
    });
  return {
    table,
    owner,
    builds,
    dimsOf,
    candidates,
    putOwner: db.prepare(
      `INSERT INTO vector_index_owners (model, user_id, generation, trained, size, scale, centroids, build) VALUES (?, ?, 1, ?, ?, ?, ?, ?)
       ON CONFLICT (model, user_id) DO UPDATE SET generation = generation + 1, trained = excluded.trained, size = excluded.size,
         scale = excluded.scale, centroids = excluded.centroids, build = excluded.build`,
    ),
    grow: db.prepare("UPDATE vector_index_owners SET size = size + ? WHERE model = ? AND user_id = ?"),
    dropEmpty: db.prepare("DELETE FROM vector_index_owners WHERE size <= 0"),
    putBuild: db.prepare(
      "INSERT INTO vector_index_builds (model, user_id, trained, size, scale, centroids, touched_at) VALUES (?, ?, ?, 0, ?, ?, ?)",
    ),
    liveBuild: db
      .prepare("SELECT 1 FROM vector_index_builds WHERE model = ? AND user_id = ? AND touched_at > ?")
      .pluck(),
    /** The writer's own progress: rows added, and that it is alive. */
    progress: db.prepare("UPDATE vector_index_builds SET size = size + ?, touched_at = ? WHERE id = ?"),
    buildSize: db.prepare("SELECT size FROM vector_index_builds WHERE id = ?").pluck(),
    growBuild: db.prepare("UPDATE vector_index_builds SET size = size + ? WHERE id = ?"),
    dropBuild: db.prepare("DELETE FROM vector_index_builds WHERE id = ?"),
    dropOwnerBuilds: db.prepare("DELETE FROM vector_index_builds WHERE model = ? AND user_id = ?"),
    ownerSessions: db.prepare("SELECT id FROM sessions WHERE user_id = ? ORDER BY id").pluck(),
    sessionVectors: db
      .prepare("SELECT seq, vector, created_at FROM message_vectors WHERE session_id = ? AND model = ?")
      .raw(),
    sessionKeys: db.prepare("SELECT seq, created_at FROM message_vectors WHERE session_id = ? AND model = ?").raw(),
    // Through the keys' index (schema v12), never the vectors' rows.
    vectorKey: db
      .prepare(
        "SELECT created_at, model FROM message_vectors INDEXED BY message_vectors_current WHERE session_id = ? AND seq = ?",
      )
      .raw(),
    oneVector: db.prepare("SELECT vector, model FROM message_vectors WHERE session_id = ? AND seq = ?").raw(),
    ownerBuildsWritten: db
      .prepare("SELECT DISTINCT build FROM vector_index_rows WHERE user_id = ? AND model = ?")
      .pluck(),
    buildRows: db
      .prepare("SELECT id FROM vector_index_rows WHERE user_id = ? AND model = ? AND build = ? LIMIT ?")
      .pluck(),
    addRow: db.prepare(
      "INSERT OR IGNORE INTO vector_index_rows (session_id, seq, model, user_id, build) VALUES (?, ?, ?, ?, ?)",
    ),
    queued: db
      .prepare(
        `SELECT q.session_id, q.seq, v.model, v.vector, s.user_id FROM vector_index_queue q
         JOIN message_vectors v ON v.session_id = q.session_id AND v.seq = q.seq JOIN sessions s ON s.id = q.session_id`,
      )
      .raw(),
    clearQueue: db.prepare("DELETE FROM vector_index_queue"),
    gone: db
      .prepare(
        "SELECT g.id, r.model, r.user_id, r.build FROM vector_index_gone g JOIN vector_index_rows r ON r.id = g.id",
      )
      .raw(),
    removeRow: db.prepare("DELETE FROM vector_index_rows WHERE id = ?"),
    clearGone: db.prepare("DELETE FROM vector_index_gone"),
    pending: db
      .prepare("SELECT (SELECT 1 FROM vector_index_queue LIMIT 1) OR (SELECT 1 FROM vector_index_gone LIMIT 1)")
      .pluck(),
  };
}

type Statements = ReturnType<typeof prepare>;
const prepared = new WeakMap<Database.Database, Statements>();
/** The index's statements, or undefined when the file has no index or the extension is missing. */
function statements(db: Database.Database, create: boolean): Statements | undefined {
  let st = prepared.get(db);
  if (st) return st;
  if (!create && !hasIndex(db)) return undefined;
  if (!loadVectorExtension(db)) return undefined;
  prepared.set(db, (st = prepare(db)));
  return st;
}

/** Counts of vectors added to (or removed from) each owner's index, written once per batch. */
class SizeChanges extends Map<string, number> {
  note(model: string, userId: string, by: number) {
    const key = `${model}\n${userId}`;
    this.set(key, (this.get(key) ?? 0) + by);
  }
  write(st: Statements) {
    for (const [key, by] of this) {
      const [model, userId] = key.split("\n");
      st.grow.run(by, model, userId);
    }
  }
}

/**
 * Applies the queued changes (vectors added, replaced or gone) to the index, to the published cells
 * and to any build being written for the owner; a no-op without an index. Runs inside the caller's
 * transaction when there is one.
 */
export function syncVectorIndex(db: Database.Database): void {
  const st = statements(db, false);
  if (!st || !st.pending.get()) return;
  // Read fully first: a connection cannot write while a statement iterates (the queues are short).
  db.transaction(() => {
    const sizes = new SizeChanges();
    for (const [id, model, userId, build] of st.gone.all() as [number, string, string, number][]) {
      st.table(model).remove.run(BigInt(id));
      st.removeRow.run(id);
      // A row of the published cells, or of a build being written (a build's left-overs count for none).
      if (st.owner(model, userId)?.build === build) sizes.note(model, userId, -1);
      else st.growBuild.run(-1, build);
    }
    st.clearGone.run();
    for (const [sessionId, seq, model, packed, userId] of st.queued.all() as [
      string,
      number,
      string,
      Buffer,
      string,
    ][]) {
      const vector = unpack(packed);
      const owner = st.owner(model, userId);
      if (owner && add(st, owner, sessionId, seq, model, vector, userId)) sizes.note(model, userId, 1);
      for (const build of st.builds(model, userId)) {
        if (add(st, build, sessionId, seq, model, vector, userId)) st.growBuild.run(1, build.build);
      }
    }
    st.clearQueue.run();
    sizes.write(st);
    // An erased owner's centroids go with its last vector.
    st.dropEmpty.run();
  })();
}

/** Puts a vector in its nearest cell of `target`, unless that build holds it already; whether it was added. */
function add(
  st: Statements,
  target: Target,
  sessionId: string,
  seq: number,
  model: string,
  vector: Float32Array,
  userId: string,
): boolean {
  const row = st.addRow.run(sessionId, seq, model, userId, target.build);
  if (row.changes === 0) return false;
  st.table(model).insert.run(
    BigInt(row.lastInsertRowid),
    userId,
    cellKey(target, target.cells.nearest(vector)),
    quantize(vector, target.scale),
  );
  return true;
}

/**
 * A training of one owner's cells and every vector's place in them, computed from a read of the file
 * without writing: what {@link writeOwnerIndex} puts in the index in short transactions.
 */
export interface OwnerIndexPlan {
  userId: string;
  model: string;
  /** The vectors the cells were trained for (`trained` in `vector_index_owners`). */
  count: number;
  dims: number;
  scale: number;
  centroids: Float32Array;
  /** `session id \n seq \n created_at` → position in `cells` and `quantized`. */
  at: Map<string, number>;
  cells: Int32Array;
  /** The vectors as int8 at `scale`, `dims` bytes each. */
  quantized: Buffer;
}

/**
 * Trains the owner's cells (√`count` of them, on a sample of its vectors) and computes each of its
 * vectors' cell and int8 form: the CPU of a build (~0.5 ms a vector at 768 dimensions), with no write
 * lock held, so it can run on a connection of its own in a worker thread (sqlite/_index-builder.ts).
 * @param count the owner's vectors of the model, as the search that decided to index counted them.
 * @param cancelled checked between sessions: a closing store stops a build (returns undefined).
 * @returns undefined when the extension cannot be loaded, the owner has no vectors, or it was cancelled.
 */
export function planOwnerIndex(
  db: Database.Database,
  userId: string,
  model: string,
  count: number,
  cancelled: () => boolean = () => false,
): OwnerIndexPlan | undefined {
  const st = statements(db, true);
  if (!st) return undefined;
  const { dims } = st.dimsOf(model);
  const cellCount = Math.max(1, Math.round(Math.sqrt(count)));
  // The sample: whole sessions in a random order (reading every vector would double the build's reads).
  const random = uniform(count);
  const sessions = st.ownerSessions.all(userId) as string[];
  const wanted = Math.min(count, cellCount * SAMPLE_PER_CELL);
  const sample = new Float32Array(wanted * dims);
  let sampled = 0;
  for (let i = 0; i < sessions.length && sampled < wanted; i++) {
    const j = i + Math.floor(random() * (sessions.length - i));
    [sessions[i], sessions[j]] = [sessions[j], sessions[i]];
    for (const [, vector] of st.sessionVectors.all(sessions[i], model) as [number, Buffer][]) {
      if (sampled === wanted) break;
      sample.set(unpack(vector), sampled++ * dims);
    }
  }
  if (sampled === 0 || cancelled()) return undefined;
  const trained = trainCells(sample.subarray(0, sampled * dims), dims, { cells: cellCount, seed: count });
  const scale = scaleOf(sample.subarray(0, sampled * dims));
  const at = new Map<string, number>();
  let cells = new Int32Array(Math.max(16, count));
  let quantized = Buffer.alloc(cells.length * dims);
  sessions.sort();
  for (const sessionId of sessions) {
    if (cancelled()) return undefined;
    for (const [seq, vector, createdAt] of st.sessionVectors.all(sessionId, model) as [number, Buffer, number][]) {
      const i = at.size;
      if (i === cells.length) {
        // More vectors than the search counted (written since): room for them.
        const grown = new Int32Array(cells.length * 2);
        grown.set(cells);
        cells = grown;
        quantized = Buffer.concat([quantized, Buffer.alloc(quantized.length)]);
      }
      const v = unpack(vector);
      at.set(`${sessionId}\n${seq}\n${createdAt}`, i);
      cells[i] = trained.nearest(v);
      quantize(v, scale).copy(quantized, i * dims);
    }
  }
  return { userId, model, count, dims, scale, centroids: trained.centroids, at, cells, quantized };
}

/** How {@link writeOwnerIndex} shares the file's write lock. */
export interface OwnerIndexWriting {
  /** Checked between transactions: true stops the build (what it wrote is left for the next build to remove). */
  cancelled?: () => boolean;
  /**
   * Called after each transaction with how long it held the lock, outside any transaction: a worker
   * sleeps here, so that other connections' writes, waiting in SQLite's busy handler, find the lock free.
   */
  pause?: (heldMs: number) => void;
}

/** The longest one transaction of a build writes before it commits (the lock is then free for others). */
export const WRITE_SLICE_MS = 1;
/** Rows written (or removed) between two looks at the clock. */
const SLICE_STEP = 32;

/**
 * Puts a planned training in the index, replacing an earlier one (from then on kept by the triggers),
 * in short transactions, none holding the file's write lock for much more than
 * {@link WRITE_SLICE_MS}:
 *
 * 1. one registers the build (`vector_index_builds`: its id, centroids and scale); from then on the
 *    triggers queue the owner's changes for it as for the published cells, and each sync applies them
 *    to both;
 * 2. the planned vectors are written a slice at a time under the build's own partition keys, in the
 *    order of their cells (a slice touches a few of sqlite-vec's chunks, not one per vector), each
 *    checked against the file as it is then (deleted or replaced since the plan read it: skipped);
 * 3. the owner's vectors the plan did not see (written before the registration, after the plan's
 *    read) are found by a read and written in their nearest cell;
 * 4. one small transaction publishes the build: the owner row names it, so a search reads the old
 *    cells or the new ones, never a mix, and never a build not yet published;
 * 5. the replaced cells' rows are removed a slice at a time.
 *
 * A build stopped or crashed before 4 is never read; the owner's next build supersedes it and removes
 * its rows in 5. A build another connection is still writing (its registration touched within
 * {@link STALE_BUILD_MS}) is not superseded: this one is not registered, and returns false.
 * @returns whether the build was published.
 */
export function writeOwnerIndex(db: Database.Database, plan: OwnerIndexPlan, writing: OwnerIndexWriting = {}): boolean {
  const st = statements(db, true);
  if (!st) return false;
  const { userId, model, dims } = plan;
  const cancelled = writing.cancelled ?? (() => false);
  const pause = writing.pause ?? (() => {});
  const centroids = Buffer.from(plan.centroids.buffer, plan.centroids.byteOffset, plan.centroids.byteLength);
  const build = db
    .transaction(() => {
      syncVectorIndex(db);
      // Another connection's build of the owner still being written holds the claim: superseding it
      // would let two processes (or two stores) searching the owner supersede each other's builds for
      // as long as they search, since planning takes less time than writing, and neither publish.
      const now = Date.now();
      if (st.liveBuild.get(model, userId, now - STALE_BUILD_MS) !== undefined) return undefined;
      // An earlier build of the owner never published (stopped, or its writer dead) is superseded.
      st.dropOwnerBuilds.run(model, userId);
      return Number(st.putBuild.run(model, userId, plan.count, plan.scale, centroids, now).lastInsertRowid);
    })
    .immediate();
  if (build === undefined) return false;
  const target: Target = { build, scale: plan.scale, cells: new Cells(plan.centroids, dims) };
  const { insert } = st.table(model);
  /** Runs `step` in transactions of a slice each until it says it is done; false once stopped or superseded. */
  const sliced = (step: () => boolean): boolean => {
    for (let done = false; !done;) {
      if (cancelled()) {
        // Its triggers' work stops here; its rows are the next build's to remove.
        st.dropBuild.run(build);
        return false;
      }
      const started = performance.now();
      const going = db
        .transaction(() => {
          syncVectorIndex(db);
          // Superseded by a later build of the owner: its rows are that build's to remove.
          if (st.buildSize.get(build) === undefined) return false;
          do done = step();
          while (!done && performance.now() - started < WRITE_SLICE_MS);
          return true;
        })
        .immediate();
      if (!going) return false;
      pause(performance.now() - started);
    }
    return true;
  };

  // 2. The planned vectors, by cell.
  const keys: string[][] = new Array(plan.at.size);
  for (const [key, i] of plan.at) keys[i] = key.split("\n");
  const order = Array.from(keys.keys()).sort((a, b) => plan.cells[a] - plan.cells[b]);
  let next = 0;
  const planned = sliced(() => {
    let added = 0;
    for (const end = Math.min(order.length, next + SLICE_STEP); next < end; next++) {
      const i = order[next];
      const [sessionId, seq, createdAt] = keys[i];
      const now = st.vectorKey.get(sessionId, Number(seq)) as [number, string] | undefined;
      // Deleted or replaced since the plan read it (a replaced one is written in 3 or by a sync).
      if (!now || now[0] !== Number(createdAt) || now[1] !== model) continue;
      // Queued and placed already by a sync since the registration: kept.
      const row = st.addRow.run(sessionId, Number(seq), model, userId, build);
      if (row.changes === 0) continue;
      insert.run(
        BigInt(row.lastInsertRowid),
        userId,
        cellKey(target, plan.cells[i]),
        plan.quantized.subarray(i * dims, (i + 1) * dims),
      );
      added++;
    }
    st.progress.run(added, Date.now(), build);
    return next === order.length;
  });
  if (!planned) return false;

  // 3. What the plan did not see: read after the registration, so anything later is queued for the build.
  const unseen: [string, number][] = [];
  for (const sessionId of st.ownerSessions.all(userId) as string[]) {
    for (const [seq, createdAt] of st.sessionKeys.all(sessionId, model) as [number, number][]) {
      if (!plan.at.has(`${sessionId}\n${seq}\n${createdAt}`)) unseen.push([sessionId, seq]);
    }
  }
  next = 0;
  const complete = sliced(() => {
    let added = 0;
    for (const end = Math.min(unseen.length, next + SLICE_STEP); next < end; next++) {
      const [sessionId, seq] = unseen[next];
      const now = st.oneVector.get(sessionId, seq) as [Buffer, string] | undefined;
      if (now && now[1] === model && add(st, target, sessionId, seq, model, unpack(now[0]), userId)) added++;
    }
    st.progress.run(added, Date.now(), build);
    return next === unseen.length;
  });
  if (!complete) return false;

  // 4. The swap.
  const published = db
    .transaction(() => {
      syncVectorIndex(db);
      const size = st.buildSize.get(build) as number | undefined;
      if (size === undefined) return false;
      st.putOwner.run(model, userId, plan.count, size, plan.scale, centroids, build);
      st.dropBuild.run(build);
      st.dropEmpty.run();
      return true;
    })
    .immediate();
  // 5.
  if (published) removeOldBuilds(db, st, userId, model, cancelled, pause);
  return published;
}

/**
 * Removes the owner's rows of builds neither published nor being written (the cells a build replaced,
 * a stopped or crashed build's), a slice at a time.
 */
function removeOldBuilds(
  db: Database.Database,
  st: Statements,
  userId: string,
  model: string,
  cancelled: () => boolean,
  pause: (heldMs: number) => void,
): void {
  const { remove } = st.table(model);
  for (const build of st.ownerBuildsWritten.all(userId, model) as number[]) {
    for (let more = true; more;) {
      if (cancelled()) return;
      const started = performance.now();
      more = db
        .transaction(() => {
          // Checked in the transaction: published or registered meanwhile (another process) is kept.
          if (st.owner(model, userId)?.build === build || st.buildSize.get(build) !== undefined) return false;
          do {
            const ids = st.buildRows.all(userId, model, build, SLICE_STEP) as number[];
            for (const id of ids) {
              remove.run(BigInt(id));
              st.removeRow.run(id);
            }
            if (ids.length < SLICE_STEP) return false;
          } while (performance.now() - started < WRITE_SLICE_MS);
          return true;
        })
        .immediate();
      pause(performance.now() - started);
    }
  }
}

/**
 * Trains the owner's cells and puts all its vectors of the model into them, in the calling thread
 * ({@link planOwnerIndex} then {@link writeOwnerIndex}).
 * @returns false when the extension cannot be loaded.
 */
export function indexOwner(db: Database.Database, userId: string, model: string, count: number): boolean {
  if (!statements(db, true)) return false;
  syncVectorIndex(db);
  const plan = planOwnerIndex(db, userId, model, count);
  return plan === undefined || writeOwnerIndex(db, plan);
}

/**
 * Whether another connection is writing a build of the owner's model (registered and touched within
 * {@link STALE_BUILD_MS}): a worker then skips planning one that {@link writeOwnerIndex} would not register.
 */
export function buildUnderWay(db: Database.Database, userId: string, model: string): boolean {
  const columns = db.prepare("SELECT name FROM pragma_table_info('vector_index_builds')").pluck().all();
  if (!columns.includes("touched_at")) return false;
  return (
    db
      .prepare("SELECT 1 FROM vector_index_builds WHERE model = ? AND user_id = ? AND touched_at > ?")
      .get(model, userId, Date.now() - STALE_BUILD_MS) !== undefined
  );
}

/** Whether the owner's vectors of the model are indexed and the index usable in this process. */
export function isIndexed(db: Database.Database, userId: string, model: string): boolean {
  const st = statements(db, false);
  return st !== undefined && st.owner(model, userId) !== undefined;
}

/** A candidate with its stored vector: session id, seq, created_at, packed vector, still eligible. */
export type Candidate = [sessionId: string, seq: number, createdAt: number, vector: Buffer, live: number];

/** What {@link indexCandidates} found. */
export interface IndexCandidates {
  candidates: Candidate[];
  /** Every vector of the owner was a candidate (the answer is exact). */
  complete: boolean;
  /** The owner has grown past `retrainAfter` times what its cells were trained on. */
  grown: boolean;
}

/**
 * The owner's nearest candidates: the nearest by int8 distance among the vectors of the `probes` cells
 * whose centroids are nearest to the query (sqlite-vec), the best `candidates` of them each with its
 * stored vector and whether it is still eligible (owner, model, activity).
 */
export function indexCandidates(
  db: Database.Database,
  query: { userId: string; model: string; normalized: Float32Array; since: number; limit: number },
  options: SqliteVectorIndexOptions,
): IndexCandidates {
  const st = statements(db, false)!;
  syncVectorIndex(db);
  const owner = st.owner(query.model, query.userId);
  if (!owner) return { candidates: [], complete: false, grown: false };
  const enough = Math.ceil(
    ((options.minProbedVectors ?? DEFAULT_MIN_PROBED) * owner.cells.cells) / Math.max(1, owner.size),
  );
  const probes = Math.max(
    1,
    Math.min(owner.cells.cells, Math.max(Math.floor(options.probes ?? DEFAULT_PROBES), enough)),
  );
  const wanted = Math.max(query.limit, Math.floor(options.candidates ?? DEFAULT_CANDIDATES));
  // Twice the limit from each cell: the int8 order can swap near-ties, and a cell may hold the whole answer.
  const perCell = Math.min(MAX_K, 2 * query.limit);
  // The published build's partition keys (numbers: json_each reads them as integers).
  const cells = owner.cells.nearestCells(query.normalized, probes).map((cell) => owner.build * CELL_SPAN + cell);
  const near = st
    .table(query.model)
    .knn.all(quantize(query.normalized, owner.scale), perCell, query.userId, JSON.stringify(cells)) as [
    number,
    number,
  ][];
  near.sort((a, b) => a[1] - b[1]);
  const ids = near.slice(0, wanted).map(([id]) => id);
  const candidates = st.candidates.all(
    query.userId,
    query.model,
    query.since,
    query.since,
    JSON.stringify(ids),
  ) as Candidate[];
  return {
    candidates,
    complete: near.length >= owner.size && ids.length === near.length,
    grown: owner.size >= owner.trained * (options.retrainAfter ?? DEFAULT_RETRAIN_AFTER),
  };
}
