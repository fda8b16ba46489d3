/**
 * The SQLite store's approximate nearest-neighbour index over large owners' embeddings: one bit a
 * dimension (the sign of the normalised vector) in a `sqlite-vec` `vec0` table per model, partitioned
 * by owner. A search takes the nearest candidates by Hamming distance there (a scan of 96 bytes a
 * vector at 768 dimensions, in C) and re-scores them exactly with their float32 vectors from
 * `message_vectors`, which stay the source of truth. The index is a cache of those rows:
 *
 * - It holds only owners whose vectors of a model passed `minOwnerVectors` in an exact scan
 *   (`vector_index_owners`); smaller owners are scanned exactly, which is faster for them.
 * - Ordinary triggers on `message_vectors` (no virtual table in them, so a process that cannot load the
 *   extension writes as before) queue what changed: `vector_index_queue` (vectors added or replaced for
 *   an indexed owner) and `vector_index_gone` (index rows whose vector went: truncation, deletion,
 *   expiry, a replaced vector). The queues are applied before each indexed search and after each write
 *   of vectors, in the caller's transaction, so every write path, every process and a restart leave the
 *   index consistent.
 * - A candidate is returned only when its row in `message_vectors` is still the owner's, of the model,
 *   of a session active since `activeSince`; a search whose candidates were thinned below its limit by
 *   that filter is answered by the exact scan instead.
 *
 * The objects are created on first use (IF NOT EXISTS), not by a schema migration: a database whose
 * owners never grow large never gets them, and the virtual tables need the extension loaded.
 */
import type Database from "better-sqlite3";
import * as sqliteVec from "sqlite-vec";
import { activeSinceSql } from "./_activity.js";

/** How the index is used; `false` turns it off (every search scans exactly). */
export interface SqliteVectorIndexOptions {
  /**
   * An owner's vectors of a model are indexed once an exact scan of them counted at least this many
   * (smaller owners are scanned exactly, which is faster there; docs/benchmarks.md `vectors`).
   * @default 5000
   */
  minOwnerVectors?: number;
  /**
   * Candidates taken from the binary index for exact re-scoring, per search (at least `limit`; at
   * most 4096, sqlite-vec's limit). More is slower (sqlite-vec's cost grows with it) and closer to the
   * exact scan: on the benchmark's clustered vectors 500 gives recall@10 1.00 at 100,000 vectors and
   * 0.72 at a million (docs/benchmarks.md `vectors`).
   * @default 500
   */
  candidates?: number;
}

export const DEFAULT_MIN_OWNER_VECTORS = 5_000;
export const DEFAULT_CANDIDATES = 500;
/** sqlite-vec's largest `k`. */
const MAX_K = 4096;

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
        console.warn(`[threadkeep] sqlite: sqlite-vec could not be loaded (${(error as Error).message}); semantic search scans every vector`);
      }
    }
    loaded.set(db, ok);
  }
  return ok;
}

/** The sign bits of a normalised vector, padded to whole bytes (a `vec0` bit column's form). */
export function signBits(vector: ArrayLike<number>): Buffer {
  const bits = Buffer.alloc(Math.ceil(vector.length / 8));
  for (let i = 0; i < vector.length; i++) if (vector[i] > 0) bits[i >> 3] |= 1 << (i & 7);
  return bits;
}

/** The sign bits of a stored (packed little-endian float32) vector, without unpacking it. */
function packedSignBits(packed: Uint8Array): Buffer {
  const dims = packed.byteLength >> 2;
  const bits = Buffer.alloc(Math.ceil(dims / 8));
  // A float's sign is the top bit of its last byte; +0 and -0 both count as not positive.
  for (let i = 0; i < dims; i++) {
    const top = packed[i * 4 + 3];
    if (top < 0x80 && (top | packed[i * 4 + 2] | packed[i * 4 + 1] | packed[i * 4]) !== 0) bits[i >> 3] |= 1 << (i & 7);
  }
  return bits;
}

const BASE_SCHEMA = `
  CREATE TABLE IF NOT EXISTS vector_index_owners (model TEXT NOT NULL, user_id TEXT NOT NULL, PRIMARY KEY (model, user_id)) WITHOUT ROWID;
  CREATE TABLE IF NOT EXISTS vector_index_rows (id INTEGER PRIMARY KEY, session_id TEXT NOT NULL, seq INTEGER NOT NULL, model TEXT NOT NULL, UNIQUE (session_id, seq));
  CREATE TABLE IF NOT EXISTS vector_index_queue (session_id TEXT NOT NULL, seq INTEGER NOT NULL, PRIMARY KEY (session_id, seq)) WITHOUT ROWID;
  CREATE TABLE IF NOT EXISTS vector_index_gone (id INTEGER PRIMARY KEY);
  CREATE TRIGGER IF NOT EXISTS message_vectors_index_insert AFTER INSERT ON message_vectors
    WHEN EXISTS (SELECT 1 FROM sessions s JOIN vector_index_owners o ON o.user_id = s.user_id AND o.model = new.model WHERE s.id = new.session_id)
  BEGIN
    INSERT OR IGNORE INTO vector_index_queue (session_id, seq) VALUES (new.session_id, new.seq);
  END;
  CREATE TRIGGER IF NOT EXISTS message_vectors_index_update AFTER UPDATE ON message_vectors BEGIN
    INSERT OR IGNORE INTO vector_index_gone SELECT id FROM vector_index_rows WHERE session_id = old.session_id AND seq = old.seq;
    INSERT OR IGNORE INTO vector_index_queue (session_id, seq)
      SELECT new.session_id, new.seq WHERE EXISTS (SELECT 1 FROM sessions s JOIN vector_index_owners o ON o.user_id = s.user_id AND o.model = new.model WHERE s.id = new.session_id);
  END;
  CREATE TRIGGER IF NOT EXISTS message_vectors_index_delete AFTER DELETE ON message_vectors BEGIN
    INSERT OR IGNORE INTO vector_index_gone SELECT id FROM vector_index_rows WHERE session_id = old.session_id AND seq = old.seq;
  END;
`;

/** Whether the index's tables exist in this file (created by the first owner indexed). */
function hasIndex(db: Database.Database): boolean {
  return db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'vector_index_owners'").get() !== undefined;
}

const tableOf = (modelRowid: number) => `vector_index_m${modelRowid}`;

function prepare(db: Database.Database) {
  db.exec(BASE_SCHEMA);
  const tables = new Map<string, { name: string; insert: Database.Statement; remove: Database.Statement; knn: Database.Statement }>();
  const modelRowid = db.prepare("SELECT rowid, dims FROM embedding_models WHERE model = ?");
  /** The model's vec0 table and its statements (created on first use). */
  const table = (model: string) => {
    let t = tables.get(model);
    if (!t) {
      const row = modelRowid.get(model) as { rowid: number; dims: number } | undefined;
      if (!row) throw new Error(`No dimensions recorded for embedding model ${model}`);
      const name = tableOf(row.rowid);
      const bitDims = Math.ceil(row.dims / 8) * 8;
      db.exec(`CREATE VIRTUAL TABLE IF NOT EXISTS ${name} USING vec0(user_id TEXT PARTITION KEY, bits BIT[${bitDims}])`);
      t = {
        name,
        insert: db.prepare(`INSERT INTO ${name} (rowid, user_id, bits) VALUES (?, ?, vec_bit(?))`),
        remove: db.prepare(`DELETE FROM ${name} WHERE rowid = ?`),
        // The candidates with their stored vectors, for the owner's sessions active since a time
        // (the exact filter runs on the few candidates, not on the index).
        knn: db
          .prepare(
            `WITH knn AS (SELECT rowid AS id FROM ${name} WHERE bits MATCH vec_bit(?) AND k = ? AND user_id = ?)
             SELECT v.session_id, v.seq, v.created_at, v.vector, s.user_id = ? AND v.model = ? AND ${activeSinceSql("s")} AS live
             FROM knn JOIN vector_index_rows r ON r.id = knn.id
             JOIN message_vectors v ON v.session_id = r.session_id AND v.seq = r.seq
             JOIN sessions s ON s.id = v.session_id`,
          )
          .raw(),
      };
      tables.set(model, t);
    }
    return t;
  };
  return {
    table,
    indexed: db.prepare("SELECT 1 FROM vector_index_owners WHERE model = ? AND user_id = ?").pluck(),
    addOwner: db.prepare("INSERT OR IGNORE INTO vector_index_owners (model, user_id) VALUES (?, ?)"),
    ownerSessions: db.prepare("SELECT id FROM sessions WHERE user_id = ?").pluck(),
    sessionVectors: db
      .prepare(
        `SELECT v.seq, v.vector FROM message_vectors v
         WHERE v.session_id = ? AND v.model = ? AND NOT EXISTS (SELECT 1 FROM vector_index_rows r WHERE r.session_id = v.session_id AND r.seq = v.seq)`,
      )
      .raw(),
    addRow: db.prepare("INSERT INTO vector_index_rows (session_id, seq, model) VALUES (?, ?, ?)"),
    queued: db
      .prepare(
        `SELECT q.session_id, q.seq, v.model, v.vector, s.user_id FROM vector_index_queue q
         JOIN message_vectors v ON v.session_id = q.session_id AND v.seq = q.seq JOIN sessions s ON s.id = q.session_id`,
      )
      .raw(),
    clearQueue: db.prepare("DELETE FROM vector_index_queue"),
    gone: db.prepare("SELECT g.id, r.model FROM vector_index_gone g JOIN vector_index_rows r ON r.id = g.id").raw(),
    removeRow: db.prepare("DELETE FROM vector_index_rows WHERE id = ?"),
    clearGone: db.prepare("DELETE FROM vector_index_gone"),
    pending: db.prepare("SELECT (SELECT 1 FROM vector_index_queue LIMIT 1) OR (SELECT 1 FROM vector_index_gone LIMIT 1)").pluck(),
  };
}

const prepared = new WeakMap<Database.Database, ReturnType<typeof prepare>>();
/** The index's statements, or undefined when the file has no index or the extension is missing. */
function statements(db: Database.Database, create: boolean): ReturnType<typeof prepare> | undefined {
  let st = prepared.get(db);
  if (st) return st;
  if (!create && !hasIndex(db)) return undefined;
  if (!loadVectorExtension(db)) return undefined;
  prepared.set(db, (st = prepare(db)));
  return st;
}

/**
 * Applies the queued changes (vectors added, replaced or gone) to the index; a no-op without an index.
 * Runs inside the caller's transaction when there is one.
 */
export function syncVectorIndex(db: Database.Database): void {
  const st = statements(db, false);
  if (!st || !st.pending.get()) return;
  // Read fully first: a connection cannot write while a statement iterates (the queues are short).
  db.transaction(() => {
    for (const [id, model] of st.gone.all() as [number, string][]) {
      st.table(model).remove.run(BigInt(id));
      st.removeRow.run(id);
    }
    st.clearGone.run();
    for (const [sessionId, seq, model, vector, userId] of st.queued.all() as [string, number, string, Buffer, string][]) {
      add(st, sessionId, seq, model, vector, userId);
    }
    st.clearQueue.run();
  })();
}

function add(st: NonNullable<ReturnType<typeof statements>>, sessionId: string, seq: number, model: string, vector: Buffer, userId: string) {
  const id = st.addRow.run(sessionId, seq, model).lastInsertRowid;
  st.table(model).insert.run(BigInt(id), userId, packedSignBits(vector));
}

/**
 * Puts all of an owner's vectors of a model into the index (from then on kept by the triggers).
 * @returns false when the extension cannot be loaded.
 */
export function indexOwner(db: Database.Database, userId: string, model: string): boolean {
  const st = statements(db, true);
  if (!st) return false;
  syncVectorIndex(db);
  db.transaction(() => {
    st.addOwner.run(model, userId);
    // A session at a time: a connection cannot write while it iterates, and reading the owner's
    // vectors at once would hold them all in memory (3 GB for a million of 768 dimensions).
    for (const sessionId of st.ownerSessions.all(userId) as string[]) {
      for (const [seq, vector] of st.sessionVectors.all(sessionId, model) as [number, Buffer][]) add(st, sessionId, seq, model, vector, userId);
    }
  }).immediate();
  return true;
}

/** Whether the owner's vectors of the model are indexed and the index usable in this process. */
export function isIndexed(db: Database.Database, userId: string, model: string): boolean {
  const st = statements(db, false);
  return st !== undefined && st.indexed.get(model, userId) !== undefined;
}

/** A candidate with its stored vector: session id, seq, created_at, packed vector, still eligible. */
export type Candidate = [sessionId: string, seq: number, createdAt: number, vector: Buffer, live: number];

/**
 * The owner's nearest candidates in the index by Hamming distance to the query's sign bits, each with
 * its stored vector and whether it is still eligible (owner, model, activity).
 */
export function indexCandidates(
  db: Database.Database,
  query: { userId: string; model: string; normalized: Float32Array; since: number; k: number },
): Candidate[] {
  const st = statements(db, false)!;
  syncVectorIndex(db);
  const k = Math.min(MAX_K, Math.max(1, Math.floor(query.k)));
  return st
    .table(query.model)
    .knn.all(signBits(query.normalized), k, query.userId, query.userId, query.model, query.since, query.since) as Candidate[];
}
