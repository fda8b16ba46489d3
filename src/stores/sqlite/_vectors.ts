/**
 * The SQLite store's embeddings: packed float32 blobs beside the messages (migration v6), searched by
 * an exact scan of the owner's own vectors (the owner's sessions index bounds it), cosine similarity
 * computed in JavaScript over the blobs; a large owner's through an IVF index (k-means cells, int8 in
 * sqlite-vec) re-scored exactly (sqlite/_vector-index.ts).
 */
import type Database from "better-sqlite3";
import type { EmbeddingInput, VectorHit, VectorQuery } from "../../core/types.js";
import type { SqliteStoreDb } from "./_db.js";
import { activeSinceSql } from "./_activity.js";
import { checkDimensions, dimensionMismatch, dot, normalize, packVector, TopK, unpackVector, vectorHit } from "../_vectors.js";
import { DEFAULT_SEARCH_LIMIT } from "../_util.js";
import { DEFAULT_MIN_OWNER_VECTORS, indexCandidates, indexOwner, isIndexed, type SqliteVectorIndexOptions, syncVectorIndex } from "./_vector-index.js";

type Row = [sessionId: string, seq: number, createdAt: number, vector: Buffer];

function prepare(db: Database.Database) {
  const raw = (sql: string) => db.prepare(sql).raw();
  return {
    dims: db.prepare("SELECT dims FROM embedding_models WHERE model = ?").pluck(),
    setDims: db.prepare("INSERT OR IGNORE INTO embedding_models (model, dims) VALUES (?, ?)"),
    put: db.prepare(
      `INSERT INTO message_vectors (session_id, seq, created_at, model, vector)
       SELECT @sid, @seq, @at, @model, @vector
       WHERE EXISTS (SELECT 1 FROM messages WHERE session_id = @sid AND seq = @seq AND created_at = @at)
       ON CONFLICT (session_id, seq) DO UPDATE SET created_at = excluded.created_at, model = excluded.model, vector = excluded.vector`,
    ),
    missing: db
      .prepare(
        `SELECT m.seq FROM messages m LEFT JOIN message_vectors v ON v.session_id = m.session_id AND v.seq = m.seq
         WHERE m.session_id = ? AND (v.seq IS NULL OR v.model != ? OR v.created_at != m.created_at) ORDER BY m.seq LIMIT ?`,
      )
      .pluck(),
    // Ownership is in the query: only vectors of the owner's sessions are read.
    scan: raw(
      `SELECT v.session_id, v.seq, v.created_at, v.vector FROM sessions s JOIN message_vectors v ON v.session_id = s.id
       WHERE s.user_id = ? AND ${activeSinceSql("s")} AND v.model = ? AND v.seq > ? AND v.seq < ?`,
    ),
    scanSession: raw(
      `SELECT v.session_id, v.seq, v.created_at, v.vector FROM sessions s JOIN message_vectors v ON v.session_id = s.id
       WHERE s.id = ? AND s.user_id = ? AND ${activeSinceSql("s")} AND v.model = ? AND v.seq > ? AND v.seq < ?`,
    ),
    message: raw("SELECT seq, created_at, body FROM messages WHERE session_id = ? AND seq = ? AND created_at = ?"),
  };
}

const prepared = new WeakMap<Database.Database, ReturnType<typeof prepare>>();
const statements = (db: Database.Database) => {
  let st = prepared.get(db);
  if (!st) prepared.set(db, (st = prepare(db)));
  return st;
};

/** Stores embeddings in one transaction. @throws `embedding_dimension_mismatch`. */
export function putVectors(store: SqliteStoreDb, sessionId: string, model: string, items: EmbeddingInput[]): void {
  const st = statements(store.db);
  store.db.transaction(() => {
    store.exists(sessionId);
    for (const item of items) checkDimensions(model, st.dims.get(model) as number | undefined, item.vector.length);
    if (items.length > 0) st.setDims.run(model, items[0].vector.length);
    for (const item of items) {
      st.put.run({ sid: sessionId, seq: item.seq, at: item.createdAt, model, vector: packVector(normalize(item.vector)) });
    }
    // The triggers queued the indexed owners' new vectors; they go into the index in this transaction.
    syncVectorIndex(store.db);
  }).immediate();
}

/** Seqs without a current embedding of `model`, oldest first. */
export function missingVectors(store: SqliteStoreDb, sessionId: string, model: string, limit: number): number[] {
  return statements(store.db).missing.all(sessionId, model, limit) as number[];
}

/** Builds (or, `again`, trains again) an owner's index of a model for `count` vectors. */
export type BuildVectorIndex = (userId: string, model: string, count: number, again: boolean) => void;

/** Owners whose retraining is scheduled, per connection (one at a time each). */
const retraining = new WeakMap<Database.Database, Set<string>>();

/**
 * Builds an owner's index in this thread (`vectorIndex.background: false`, or a store without a file,
 * which no worker thread can open): at once, and a retraining once the current call has returned (the
 * search that noticed is answered from the old cells). It holds the event loop for the build
 * (docs/benchmarks/vectors.md).
 */
function inlineBuilder(db: Database.Database): BuildVectorIndex {
  return (userId, model, count, again) => {
    if (!again) {
      indexOwner(db, userId, model, count);
      return;
    }
    let pending = retraining.get(db);
    if (!pending) retraining.set(db, (pending = new Set()));
    const key = `${model}\n${userId}`;
    if (pending.has(key)) return;
    pending.add(key);
    setImmediate(() => {
      try {
        if (db.open) indexOwner(db, userId, model, count);
      } catch (error) {
        // A closed store or a busy file: the next search that notices tries again.
        console.warn(`[threadkeep] sqlite: building the vector index failed (${(error as Error).message})`);
      } finally {
        pending.delete(key);
      }
    });
  };
}

/**
 * The nearest messages of one owner, best first: through the IVF index for an owner it holds (a
 * search of all the owner's sessions, without seq bounds), else by an exact scan, after which an owner
 * found with `minOwnerVectors` or more is indexed by `build` (a worker thread for a file's store)
 * for the searches after it (sqlite/_vector-index.ts).
 */
export function searchVectors(
  store: SqliteStoreDb,
  query: VectorQuery,
  index: SqliteVectorIndexOptions | false = {},
  build: BuildVectorIndex = inlineBuilder(store.db),
): VectorHit[] {
  const st = statements(store.db);
  const normalized = normalize(query.vector);
  const dims = st.dims.get(query.model) as number | undefined;
  if (dims === undefined) return [];
  if (dims !== normalized.length) throw dimensionMismatch(query.model, dims, normalized.length);
  const limit = query.limit ?? DEFAULT_SEARCH_LIMIT;
  const after = query.afterSeq ?? Number.MIN_SAFE_INTEGER;
  const before = query.beforeSeq ?? Number.MAX_SAFE_INTEGER;
  const since = query.activeSince ?? Number.MIN_SAFE_INTEGER;
  // Session and seq bounded searches (recall within a session) stay exact: a session is small, and
  // bounds would thin the index's candidates unpredictably.
  const whole = index !== false && query.sessionId === undefined && query.beforeSeq === undefined && query.afterSeq === undefined;
  const top = new TopK(limit);
  const createdAt = new Map<string, number>();
  const consider = (sessionId: string, seq: number, at: number, vector: Buffer) => {
    const score = dot(unpackVector(vector), normalized);
    if (score <= top.floor) return;
    // Scores first; messages are read only for the few that win.
    top.add({ sessionId, seq, snippet: "", message: undefined as never, score });
    createdAt.set(`${sessionId}\n${seq}`, at);
  };
  let answered = false;
  if (whole && limit > 0 && isIndexed(store.db, query.userId, query.model)) {
    const found = indexCandidates(store.db, { userId: query.userId, model: query.model, normalized, since, limit }, index);
    let live = 0;
    for (const [sessionId, seq, at, vector, eligible] of found.candidates) {
      if (!eligible) continue;
      live++;
      consider(sessionId, seq, at, vector);
    }
    // Too few eligible candidates (expired sessions not swept yet) and the exact scan answers.
    answered = live >= limit || found.complete;
    if (found.grown) {
      const size = store.db.prepare("SELECT size FROM vector_index_owners WHERE model = ? AND user_id = ?").pluck().get(query.model, query.userId) as number;
      build(query.userId, query.model, size, true);
    }
  }
  if (!answered) {
    const rows = (
      query.sessionId
        ? st.scanSession.iterate(query.sessionId, query.userId, since, since, query.model, after, before)
        : st.scan.iterate(query.userId, since, since, query.model, after, before)
    ) as Iterable<Row>;
    let scanned = 0;
    for (const row of rows) {
      scanned++;
      consider(row[0], row[1], row[2], row[3]);
    }
    if (whole && scanned >= (index.minOwnerVectors ?? DEFAULT_MIN_OWNER_VECTORS) && !isIndexed(store.db, query.userId, query.model)) {
      build(query.userId, query.model, scanned, false);
    }
  }
  const hits: VectorHit[] = [];
  for (const hit of top.hits) {
    const found = st.message.all(hit.sessionId, hit.seq, createdAt.get(`${hit.sessionId}\n${hit.seq}`));
    const [message] = store.messages(hit.sessionId, found as never);
    if (message) hits.push(vectorHit(hit.sessionId, message, hit.score));
  }
  return hits;
}
