/**
 * pgvector's HNSW index for large owners' message vectors, used instead of the SQL IVF
 * (`postgres/_ivf.ts`) when the `vector` extension is installed in the database or can be created
 * there (pgvector 0.5.0 or later: HNSW). Debian's PostgreSQL packages do not ship it, so the tables
 * below are not a numbered migration: they are created when the store opens and finds the extension.
 *
 * - `vector_hnsw` registers one index of an owner's vectors of a model (its dimensions, whether it is
 *   ready); `vector_hnsw_rows` holds a copy of each of those vectors as pgvector's `vector`, keyed by
 *   registration, and each registration has a partial HNSW index of its own
 *   (`vector_hnsw_<id>`, inner product on the normalised vectors, `WHERE hnsw = <id>`): one owner's
 *   search walks only that owner's graph.
 * - A build (in the background, once an owner is seen large) registers under the same exclusive
 *   advisory lock as the IVF's, copies the owner's vectors a session at a time, then creates the index
 *   `CONCURRENTLY` (writers are not blocked) on a connection without a statement timeout.
 * - Writers copy each vector they write into each of the owner's registrations, in their transaction
 *   (as the IVF's codes). Copies go with their vectors (foreign key); an owner's registrations with its
 *   last session; an index whose registration is gone is dropped by the next build.
 * - A search asks the index for `candidates` nearest (`hnsw.ef_search` at least that), keeps those of
 *   the owner's sessions that pass the query's filters, and answers when at least `limit` are left
 *   (else the caller scans exactly).
 */
import type { Message, VectorHit, VectorQuery } from "../../core/types.js";
import { float32Text, normalize, vectorHit } from "../_vectors.js";
import { claimBuild } from "./_build-claim.js";
import type { PgSql } from "./_client.js";
import { type MessageRow, toMessage } from "./_rows.js";

/** Where the `vector` extension is, when the store can use it. */
export interface Pgvector {
  /** The schema that holds its type and operators. */
  schema: string;
  version: string;
}

/** The least pgvector with HNSW. */
const HNSW_SINCE = [0, 5, 0];

const newer = (version: string, than: number[]) => {
  const parts = version.split(".").map((x) => Number.parseInt(x, 10) || 0);
  for (let i = 0; i < than.length; i++) if ((parts[i] ?? 0) !== than[i]) return (parts[i] ?? 0) > than[i];
  return true;
};

const ident = (name: string) => `"${name.replaceAll('"', '""')}"`;

/**
 * The `vector` extension if it is installed, or was created now (when the server offers it and the
 * role may), with HNSW; otherwise why not, in a sentence.
 */
export async function findPgvector(sql: PgSql): Promise<Pgvector | string> {
  const installed = async () => {
    const [row] = await sql<{ schema: string; version: string }[]>`
      SELECT n.nspname AS schema, e.extversion AS version FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
      WHERE e.extname = 'vector'`;
    return row;
  };
  let row = await installed();
  if (!row) {
    const [offered] = await sql`SELECT 1 FROM pg_available_extensions WHERE name = 'vector'`;
    if (!offered) return "the server has no vector extension (pgvector) to install";
    try {
      await sql`CREATE EXTENSION IF NOT EXISTS vector`;
    } catch (error) {
      // Another store may have created it meanwhile.
      row = await installed();
      if (!row) return `CREATE EXTENSION vector failed: ${(error as Error).message}`;
    }
    row ??= await installed();
    if (!row) return "the vector extension could not be created";
  }
  if (!newer(row.version, HNSW_SINCE)) return `pgvector ${row.version} has no HNSW (0.5.0 or later has)`;
  return { schema: row.schema, version: row.version };
}

/** Creates the HNSW tables (idempotent, under a lock so concurrent stores do not race). */
export async function createHnswTables(sql: PgSql, pg: Pgvector): Promise<void> {
  await sql.begin(async (tx) => {
    await tx`SELECT pg_advisory_xact_lock(hashtext('threadkeep.hnsw'), 0)`;
    await tx.unsafe(`
      CREATE TABLE IF NOT EXISTS vector_hnsw (
        id bigserial PRIMARY KEY,
        user_id text COLLATE "C" NOT NULL,
        model text NOT NULL,
        dims integer NOT NULL,
        ready boolean NOT NULL DEFAULT false,
        started_at bigint NOT NULL
      );
      CREATE INDEX IF NOT EXISTS vector_hnsw_owner ON vector_hnsw (user_id, model);
      CREATE TABLE IF NOT EXISTS vector_hnsw_rows (
        hnsw bigint NOT NULL REFERENCES vector_hnsw (id) ON DELETE CASCADE,
        session_id text COLLATE "C" NOT NULL,
        seq bigint NOT NULL,
        embedding ${ident(pg.schema)}.vector NOT NULL,
        PRIMARY KEY (hnsw, session_id, seq),
        FOREIGN KEY (session_id, seq) REFERENCES message_vectors (session_id, seq) ON DELETE CASCADE
      );
      CREATE INDEX IF NOT EXISTS vector_hnsw_rows_vector ON vector_hnsw_rows (session_id, seq);
      CREATE OR REPLACE FUNCTION threadkeep_hnsw_owner_gone() RETURNS trigger LANGUAGE plpgsql AS $fn$
      BEGIN
        IF NOT EXISTS (SELECT 1 FROM sessions s WHERE s.user_id = OLD.user_id AND s.id <> OLD.id) THEN
          DELETE FROM vector_hnsw WHERE user_id = OLD.user_id;
        END IF;
        RETURN NULL;
      END
      $fn$;
      DROP TRIGGER IF EXISTS sessions_hnsw_owner_gone ON sessions;
      CREATE TRIGGER sessions_hnsw_owner_gone AFTER DELETE ON sessions
        FOR EACH ROW EXECUTE FUNCTION threadkeep_hnsw_owner_gone();
    `);
  });
}

/** A registration's index name. */
export const hnswIndexName = (id: number) => `vector_hnsw_${id}`;

/** The expression the partial index orders by (a typed column, so the index knows the dimensions). */
const typed = (pg: Pgvector, dims: number) => `(embedding::${ident(pg.schema)}.vector(${Math.floor(dims)}))`;

/** A float32 vector as pgvector's text. */
export const vectorText = (v: Float32Array) => `[${float32Text(v)}]`;

/** Copies vectors just written (normalised) into each of the owner's registrations (in the writer's transaction). */
export async function hnswWritten(
  tx: PgSql,
  pg: Pgvector,
  userId: string,
  sessionId: string,
  model: string,
  items: { seq: number; vector: Float32Array }[],
): Promise<void> {
  const ids = await tx<{ id: string }[]>`SELECT id FROM vector_hnsw WHERE user_id = ${userId} AND model = ${model}`;
  for (const { id } of ids) {
    await tx`
      INSERT INTO vector_hnsw_rows (hnsw, session_id, seq, embedding)
      SELECT ${Number(id)}, v.session_id, v.seq, u.embedding::${tx.unsafe(`${ident(pg.schema)}.vector`)}
      FROM unnest(${items.map((i) => i.seq)}::bigint[], ${items.map((i) => vectorText(i.vector))}::text[]) AS u(seq, embedding)
      JOIN message_vectors v ON v.session_id = ${sessionId} AND v.seq = u.seq AND v.model = ${model}
      ON CONFLICT (hnsw, session_id, seq) DO UPDATE SET embedding = excluded.embedding`;
  }
}

/**
 * The owner's nearest messages through its latest ready HNSW index; null when it has none, undefined
 * when the index's candidates left fewer than `limit` after the query's filters.
 */
export async function hnswSearch(
  sql: PgSql,
  pg: Pgvector,
  query: VectorQuery,
  limit: number,
  candidates: number,
): Promise<VectorHit[] | undefined | null> {
  const [row] = await sql<{ id: string; dims: number }[]>`
    SELECT id, dims FROM vector_hnsw WHERE user_id = ${query.userId} AND model = ${query.model} AND ready
    ORDER BY id DESC LIMIT 1`;
  if (!row) return null;
  if (limit === 0) return [];
  const id = Number(row.id);
  const want = Math.max(limit, candidates);
  const q = vectorText(normalize(query.vector));
  const rows = await sql.begin(async (tx) => {
    // The graph walk keeps `ef_search` candidates; the partial index is chosen only when the plan sees
    // the registration's id as the constant of its predicate, hence the id written into the text.
    await tx.unsafe(`SET LOCAL hnsw.ef_search = ${Math.min(1000, Math.max(40, want))}`);
    return tx<(MessageRow & { session_id: string; score: number })[]>`
      SELECT m.session_id, m.seq, m.created_at, m.body, h.score FROM (
        SELECT r.session_id, r.seq, -(${tx.unsafe(typed(pg, row.dims))} ${tx.unsafe(`OPERATOR(${ident(pg.schema)}.<#>)`)} ${q}::${tx.unsafe(`${ident(pg.schema)}.vector`)})::float8 AS score
        FROM vector_hnsw_rows r WHERE r.hnsw = ${tx.unsafe(String(id))}
        ORDER BY ${tx.unsafe(typed(pg, row.dims))} ${tx.unsafe(`OPERATOR(${ident(pg.schema)}.<#>)`)} ${q}::${tx.unsafe(`${ident(pg.schema)}.vector`)}
        LIMIT ${want}
      ) h
      JOIN sessions s ON s.id = h.session_id AND s.user_id = ${query.userId}
      JOIN message_vectors v ON v.session_id = h.session_id AND v.seq = h.seq AND v.model = ${query.model}
      JOIN messages m ON m.session_id = v.session_id AND m.seq = v.seq AND m.created_at = v.created_at
      WHERE true
      ${query.activeSince === undefined ? tx`` : tx`AND s.last_activity_at >= ${Math.ceil(query.activeSince)}`}
      ${query.afterSeq === undefined ? tx`` : tx`AND m.seq > ${query.afterSeq}`}
      ${query.beforeSeq === undefined ? tx`` : tx`AND m.seq < ${query.beforeSeq}`}
      ORDER BY h.score DESC, m.seq DESC LIMIT ${limit}`;
  });
  if (rows.length < limit) return undefined;
  return rows.map((r) => vectorHit(r.session_id, toMessage(r) as Message, r.score));
}

/** How long an index build's statement may run. */
const BUILD_TIMEOUT_MS = 6 * 3600_000;

/** Runs with a connection of its own whose statements have `BUILD_TIMEOUT_MS`. */
type BuildRun = <T>(what: string, fn: (sql: PgSql) => Promise<T>, timeoutMs?: number) => Promise<T>;

/**
 * Registers an index of the owner's vectors, copies them, builds the graph and makes it the one
 * searches use; older registrations (and indexes left by erased owners) are dropped after.
 * `lock` takes the owner's exclusive advisory lock in a transaction.
 */
export async function hnswBuild(
  run: BuildRun,
  pg: Pgvector,
  userId: string,
  model: string,
  dims: number,
  lock: (tx: PgSql) => Promise<unknown>,
  closed: () => boolean,
  staleMs: number,
): Promise<void> {
  // A build that died left a registration and some copies: they go a bounded batch at a time.
  const stale = await run(
    "vectorIndexStale",
    (sql) => sql<{ id: string }[]>`
    SELECT id FROM vector_hnsw WHERE user_id = ${userId} AND model = ${model} AND NOT ready AND started_at <= ${Date.now() - staleMs}`,
  );
  for (const { id: old } of stale) {
    for (;;) {
      const gone = await run(
        "vectorIndexDrop",
        (sql) => sql`
        DELETE FROM vector_hnsw_rows WHERE (hnsw, session_id, seq) IN (SELECT hnsw, session_id, seq FROM vector_hnsw_rows WHERE hnsw = ${Number(old)} LIMIT 5000)`,
      );
      if (gone.count < 5000) break;
    }
  }
  const id = await run("vectorIndexStart", (sql) =>
    claimBuild(sql, { table: "vector_hnsw", userId, model, staleMs, lock, columns: { dims } }),
  );
  if (id === undefined) return;
  const sessions = await run(
    "vectorIndexSessions",
    (sql) => sql<{ id: string }[]>`SELECT id FROM sessions WHERE user_id = ${userId} ORDER BY id`,
  );
  for (const { id: sessionId } of sessions) {
    if (closed()) return;
    await run(
      "vectorIndexCopy",
      (sql) => sql`
      INSERT INTO vector_hnsw_rows (hnsw, session_id, seq, embedding)
      SELECT ${id}, v.session_id, v.seq, v.vector::${sql.unsafe(`${ident(pg.schema)}.vector`)}
      FROM message_vectors v WHERE v.session_id = ${sessionId} AND v.model = ${model}
      ON CONFLICT DO NOTHING`,
    );
  }
  if (closed()) return;
  const index = hnswIndexName(id);
  await run(
    "vectorIndexHnsw",
    async (sql) => {
      const own = await sql.reserve();
      try {
        await own.unsafe(`SET statement_timeout = ${BUILD_TIMEOUT_MS}`);
        // The planner then counts the copies, and walks the graph rather than sorting them.
        await own.unsafe(`ANALYZE vector_hnsw_rows`);
        await own.unsafe(`DROP INDEX CONCURRENTLY IF EXISTS ${ident(index)}`);
        await own.unsafe(
          `CREATE INDEX CONCURRENTLY ${ident(index)} ON vector_hnsw_rows USING hnsw (${typed(pg, dims)} ${ident(pg.schema)}.vector_ip_ops) WHERE hnsw = ${id}`,
        );
        await own.unsafe(`RESET statement_timeout`);
      } finally {
        own.release();
      }
    },
    BUILD_TIMEOUT_MS + 60_000,
  );
  const older = await run(
    "vectorIndexReady",
    (sql) =>
      sql.begin(async (tx) => {
        await tx`UPDATE vector_hnsw SET ready = true WHERE id = ${id}`;
        const rows = await tx<{ id: string }[]>`
          DELETE FROM vector_hnsw WHERE user_id = ${userId} AND model = ${model} AND id < ${id} RETURNING id`;
        return rows.map((r) => Number(r.id));
      }) as Promise<number[]>,
  );
  // Indexes whose registration is gone (replaced above, or its owner erased) are dropped.
  const left = await run(
    "vectorIndexDrop",
    (sql) => sql<{ name: string }[]>`
    SELECT c.relname AS name FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_class t ON t.oid = i.indrelid
    JOIN pg_namespace n ON n.oid = t.relnamespace
    WHERE n.nspname = current_schema() AND t.relname = 'vector_hnsw_rows' AND c.relname ~ '^vector_hnsw_[0-9]+$'
      AND NOT EXISTS (SELECT 1 FROM vector_hnsw h WHERE c.relname = 'vector_hnsw_' || h.id)`,
  );
  const names = new Set([...older.map(hnswIndexName), ...left.map((r) => r.name)]);
  for (const name of names) {
    await run(
      "vectorIndexDrop",
      (sql) => sql.unsafe(`DROP INDEX CONCURRENTLY IF EXISTS ${ident(name)}`),
      BUILD_TIMEOUT_MS,
    );
  }
}
