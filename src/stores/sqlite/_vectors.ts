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
import {
  checkDimensions,
  dimensionMismatch,
  dot,
  normalize,
  packVector,
  TopK,
  unpackVector,
  vectorHit,
} from "../_vectors.js";
import { DEFAULT_SEARCH_LIMIT } from "../_util.js";
import {
  DEFAULT_MIN_OWNER_VECTORS,
  indexCandidates,
  indexOwner,
  isIndexed,
  type SqliteVectorIndexOptions,
  syncVectorIndex,
} from "./_vector-index.js";

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
    // Through the keys' index (schema v12), never the vectors' rows: the planner would take the table.
    missing: db
      .prepare(
        `SELECT m.seq FROM messages m LEFT JOIN message_vectors v INDEXED BY message_vectors_current ON v.session_id = m.session_id AND v.seq = m.seq
         WHERE m.session_id = ? AND (v.seq IS NULL OR v.model != ? OR v.created_at != m.created_at) ORDER BY m.seq LIMIT ?`,
      )
      .pluck(),
    // The exact scan goes a session at a time, a page of seqs at a time (sliced: see SCAN_SLICE_MS);
    // ownership and activity are checked on every page, so a session deleted or expired meanwhile drops out.
    ownerSessions: db.prepare("SELECT id FROM sessions WHERE user_id = ?").pluck(),
    scanPage: raw(
      `SELECT v.session_id, v.seq, v.created_at, v.vector FROM sessions s JOIN message_vectors v ON v.session_id = s.id
       WHERE s.id = ? AND s.user_id = ? AND ${activeSinceSql("s")} AND v.model = ? AND v.seq > ? AND v.seq < ?
       ORDER BY v.seq LIMIT ?`,
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
  store.db
    .transaction(() => {
      store.exists(sessionId);
      for (const item of items) checkDimensions(model, st.dims.get(model) as number | undefined, item.vector.length);
      if (items.length > 0) st.setDims.run(model, items[0].vector.length);
      for (const item of items) {
        st.put.run({
          sid: sessionId,
          seq: item.seq,
          at: item.createdAt,
          model,
          vector: packVector(normalize(item.vector)),
        });
      }
      // The triggers queued the indexed owners' new vectors; they go into the index in this transaction.
      syncVectorIndex(store.db);
    })
    .immediate();
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

/** The longest an exact scan computes before it lets the event loop run (then goes on in a later task). */
const SCAN_SLICE_MS = 10;
/** Vectors read per page of the exact scan (about a millisecond of scoring at 768 dimensions). */
const SCAN_PAGE_ROWS = 256;

/** Runs `fn` on the store's database (opened, appends flushed, driver errors coded): one slice of a search. */
export type UseSqliteStore = <T>(fn: (store: SqliteStoreDb) => T) => T;

/** How a search reaches the store: `read` for a slice that only reads, `write` for one that may write. */
export interface SqliteSearchAccess {
  read: UseSqliteStore;
  write: UseSqliteStore;
}

const nextTask = () => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * The nearest messages of one owner, best first: through the IVF index for an owner it holds (a
 * search of all the owner's sessions, without seq bounds), else by an exact scan, after which an owner
 * found with `minOwnerVectors` or more is indexed by `build` (a worker thread for a file's store)
 * for the searches after it (sqlite/_vector-index.ts).
 *
 * The exact scan runs in slices of {@link SCAN_SLICE_MS}, a page of one session's vectors at a time,
 * the event loop free between them: 12,000 vectors of 768 dimensions scored in one go held it
 * 165–575 ms, and an owner's first search (before its index exists) scans them all. Each slice reads
 * the database as it is then (a search is not a snapshot: a message appended meanwhile may or may not
 * be seen, one deleted meanwhile is not returned).
 */
export async function searchVectors(
  { read, write }: SqliteSearchAccess,
  query: VectorQuery,
  index: SqliteVectorIndexOptions | false = {},
  build?: BuildVectorIndex,
): Promise<VectorHit[]> {
  const normalized = normalize(query.vector);
  const limit = query.limit ?? DEFAULT_SEARCH_LIMIT;
  const after = query.afterSeq ?? Number.MIN_SAFE_INTEGER;
  const before = query.beforeSeq ?? Number.MAX_SAFE_INTEGER;
  const since = query.activeSince ?? Number.MIN_SAFE_INTEGER;
  // Session and seq bounded searches (recall within a session) stay exact: a session is small, and
  // bounds would thin the index's candidates unpredictably.
  const whole =
    index !== false && query.sessionId === undefined && query.beforeSeq === undefined && query.afterSeq === undefined;
  const top = new TopK(limit);
  const createdAt = new Map<string, number>();
  const consider = (sessionId: string, seq: number, at: number, vector: Buffer) => {
    const score = dot(unpackVector(vector), normalized);
    if (score <= top.floor) return;
    // Scores first; messages are read only for the few that win.
    top.add({ sessionId, seq, snippet: "", message: undefined as never, score });
    createdAt.set(`${sessionId}\n${seq}`, at);
  };
  // May write: the index's queued changes, or a retraining built inline.
  const first = write((store) => {
    const st = statements(store.db);
    const dims = st.dims.get(query.model) as number | undefined;
    if (dims === undefined) return undefined;
    if (dims !== normalized.length) throw dimensionMismatch(query.model, dims, normalized.length);
    let answered = false;
    if (whole && limit > 0 && isIndexed(store.db, query.userId, query.model)) {
      const found = indexCandidates(
        store.db,
        { userId: query.userId, model: query.model, normalized, since, limit },
        index,
      );
      let live = 0;
      for (const [sessionId, seq, at, vector, eligible] of found.candidates) {
        if (!eligible) continue;
        live++;
        consider(sessionId, seq, at, vector);
      }
      // Too few eligible candidates (expired sessions not swept yet) and the exact scan answers.
      answered = live >= limit || found.complete;
      if (found.grown) {
        const size = store.db
          .prepare("SELECT size FROM vector_index_owners WHERE model = ? AND user_id = ?")
          .pluck()
          .get(query.model, query.userId) as number;
        (build ?? inlineBuilder(store.db))(query.userId, query.model, size, true);
      }
    }
    // The sessions to scan exactly; their vectors are read page by page below.
    const sessions = answered
      ? []
      : query.sessionId !== undefined
        ? [query.sessionId]
        : (st.ownerSessions.all(query.userId) as string[]);
    return { answered, sessions };
  });
  if (first === undefined) return [];
  if (!first.answered) {
    let scanned = 0;
    let sliceStart = performance.now();
    for (const sessionId of first.sessions) {
      let from = after;
      for (;;) {
        const rows = read(
          (store) =>
            statements(store.db).scanPage.all(
              sessionId,
              query.userId,
              since,
              since,
              query.model,
              from,
              before,
              SCAN_PAGE_ROWS,
            ) as Row[],
        );
        for (const row of rows) consider(row[0], row[1], row[2], row[3]);
        scanned += rows.length;
        if (performance.now() - sliceStart >= SCAN_SLICE_MS) {
          await nextTask();
          sliceStart = performance.now();
        }
        if (rows.length < SCAN_PAGE_ROWS) break;
        from = rows[rows.length - 1][1];
      }
    }
    if (whole && scanned >= (index.minOwnerVectors ?? DEFAULT_MIN_OWNER_VECTORS)) {
      write((store) => {
        if (!isIndexed(store.db, query.userId, query.model))
          (build ?? inlineBuilder(store.db))(query.userId, query.model, scanned, false);
      });
    }
  }
  return read((store) => {
    const st = statements(store.db);
    const hits: VectorHit[] = [];
    for (const hit of top.hits) {
      const found = st.message.all(hit.sessionId, hit.seq, createdAt.get(`${hit.sessionId}\n${hit.seq}`));
      const [message] = store.messages(hit.sessionId, found as never);
      if (message) hits.push(vectorHit(hit.sessionId, message, hit.score));
    }
    return hits;
  });
}
