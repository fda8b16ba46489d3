/**
 * The SQLite store's embeddings: packed float32 blobs beside the messages (migration v6), searched by
 * an exact scan of the owner's own vectors (the owner's sessions index bounds it), cosine similarity
 * computed in JavaScript over the blobs.
 */
import type Database from "better-sqlite3";
import type { EmbeddingInput, VectorHit, VectorQuery } from "../../core/types.js";
import type { SqliteStoreDb } from "./_db.js";
import { activeSinceSql } from "./_activity.js";
import { checkDimensions, dimensionMismatch, dot, normalize, packVector, TopK, unpackVector, vectorHit } from "../_vectors.js";

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
  }).immediate();
}

/** Seqs without a current embedding of `model`, oldest first. */
export function missingVectors(store: SqliteStoreDb, sessionId: string, model: string, limit: number): number[] {
  return statements(store.db).missing.all(sessionId, model, limit) as number[];
}

/** The nearest messages of one owner, best first. */
export function searchVectors(store: SqliteStoreDb, query: VectorQuery): VectorHit[] {
  const st = statements(store.db);
  const normalized = normalize(query.vector);
  const dims = st.dims.get(query.model) as number | undefined;
  if (dims === undefined) return [];
  if (dims !== normalized.length) throw dimensionMismatch(query.model, dims, normalized.length);
  const after = query.afterSeq ?? Number.MIN_SAFE_INTEGER;
  const before = query.beforeSeq ?? Number.MAX_SAFE_INTEGER;
  const since = query.activeSince ?? Number.MIN_SAFE_INTEGER;
  const rows = (
    query.sessionId
      ? st.scanSession.all(query.sessionId, query.userId, since, since, query.model, after, before)
      : st.scan.all(query.userId, since, since, query.model, after, before)
  ) as Row[];
  const top = new TopK(query.limit);
  const createdAt = new Map<string, number>();
  for (const row of rows) {
    const score = dot(unpackVector(row[3]), normalized);
    if (score <= top.floor) continue;
    // Scores first; messages are read only for the few that win.
    top.add({ sessionId: row[0], seq: row[1], snippet: "", message: undefined as never, score });
    createdAt.set(`${row[0]}\n${row[1]}`, row[2]);
  }
  const hits: VectorHit[] = [];
  for (const hit of top.hits) {
    const found = st.message.all(hit.sessionId, hit.seq, createdAt.get(`${hit.sessionId}\n${hit.seq}`));
    const [message] = store.messages(hit.sessionId, found as never);
    if (message) hits.push(vectorHit(hit.sessionId, message, hit.score));
  }
  return hits;
}
