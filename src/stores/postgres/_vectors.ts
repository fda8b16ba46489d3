/**
 * The PostgreSQL store's embeddings (schema version 5, `migrations/005-vectors.ts`): `real[]` beside the messages, dropped with
 * them (foreign key), and an exact cosine scan in SQL over the owner's own vectors, so only the best
 * few rows travel. pgvector is not required (nor used). An owner large enough is searched through the
 * IVF index instead (`postgres/_ivf.ts`, schema version 20), built in the background once seen large.
 */
import type postgres from "postgres";
import { SessionNotFoundError } from "../../core/errors.js";
import type { EmbeddingInput, VectorHit, VectorQuery } from "../../core/types.js";
import { type MessageRow, toMessage } from "./_rows.js";
import type { PgSql } from "./_client.js";
import { DEFAULT_SEARCH_LIMIT } from "../_util.js";
import { checkDimensions, dimensionMismatch, float32Text, normalize, vectorHit } from "../_vectors.js";
import type { VectorIndexer } from "./_ivf.js";

type Tx = postgres.TransactionSql<Record<string, unknown>>;

/** A vector as a PostgreSQL array literal (normalised: cosine similarity is then a dot product). */
const literal = (vector: ArrayLike<number>) => `{${float32Text(normalize(vector))}}`;

async function dimsOf(sql: PgSql | Tx, model: string): Promise<number | undefined> {
  const [row] = await sql<{ dims: number }[]>`SELECT dims FROM embedding_models WHERE model = ${model}`;
  return row?.dims;
}

/** Stores embeddings in one transaction. @throws `embedding_dimension_mismatch`. */
export async function putVectors(
  sql: PgSql,
  sessionId: string,
  model: string,
  items: EmbeddingInput[],
  index?: VectorIndexer,
): Promise<void> {
  await sql.begin(async (tx) => {
    const [session] = await tx<{ user_id: string }[]>`SELECT user_id FROM sessions WHERE id = ${sessionId}`;
    if (!session) throw new SessionNotFoundError(sessionId);
    if (items.length === 0) return;
    await tx`INSERT INTO embedding_models (model, dims) VALUES (${model}, ${items[0].vector.length}) ON CONFLICT DO NOTHING`;
    const dims = await dimsOf(tx, model);
    for (const item of items) checkDimensions(model, dims, item.vector.length);
    // One statement for the batch (the last vector of a seq wins, as one statement may touch a row
    // once); a vector whose message is not (or no longer) there matches no row.
    const batch = [...new Map(items.map((item) => [item.seq, item])).values()];
    await tx`
      INSERT INTO message_vectors (session_id, seq, created_at, model, vector)
      SELECT m.session_id, m.seq, m.created_at, ${model}, u.vector::real[]
      FROM unnest(${batch.map((i) => i.seq)}::bigint[], ${batch.map((i) => i.createdAt)}::bigint[], ${batch.map((i) => literal(i.vector))}::text[])
        AS u(seq, created_at, vector)
      JOIN messages m ON m.session_id = ${sessionId} AND m.seq = u.seq AND m.created_at = u.created_at
      ON CONFLICT (session_id, seq) DO UPDATE
        SET created_at = excluded.created_at, model = excluded.model, vector = excluded.vector`;
    await index?.written(
      tx as unknown as PgSql,
      session.user_id,
      sessionId,
      model,
      batch.map((i) => ({ seq: i.seq, vector: normalize(i.vector) })),
    );
  });
}

/** Seqs without a current embedding of `model`, oldest first. */
export async function missingVectors(sql: PgSql, sessionId: string, model: string, limit: number): Promise<number[]> {
  const rows = await sql<{ seq: number }[]>`
    SELECT m.seq FROM messages m LEFT JOIN message_vectors v ON v.session_id = m.session_id AND v.seq = m.seq
    WHERE m.session_id = ${sessionId} AND (v.seq IS NULL OR v.model <> ${model} OR v.created_at <> m.created_at)
    ORDER BY m.seq LIMIT ${limit}`;
  return rows.map((r) => r.seq);
}

/** The nearest messages of one owner, best first; ownership is part of the query. */
export async function searchVectors(sql: PgSql, query: VectorQuery, index?: VectorIndexer): Promise<VectorHit[]> {
  const dims = await dimsOf(sql, query.model);
  if (dims === undefined) return [];
  if (dims !== query.vector.length) throw dimensionMismatch(query.model, dims, query.vector.length);
  const indexed = await index?.search(sql, query);
  if (indexed) return indexed;
  const q = literal(query.vector);
  const rows = await sql<(MessageRow & { session_id: string; score: number })[]>`
    SELECT m.session_id, m.seq, m.created_at, m.body, s.score FROM (
      SELECT v.session_id, v.seq, v.created_at,
             (SELECT sum(a * b) FROM unnest(v.vector, ${q}::real[]) AS t(a, b))::float8 AS score
      FROM sessions o JOIN message_vectors v ON v.session_id = o.id
      WHERE o.user_id = ${query.userId} AND v.model = ${query.model}
      ${query.sessionId === undefined ? sql`` : sql`AND o.id = ${query.sessionId}`}
      ${query.activeSince === undefined ? sql`` : sql`AND o.last_activity_at >= ${Math.ceil(query.activeSince)}`}
      ${query.afterSeq === undefined ? sql`` : sql`AND v.seq > ${query.afterSeq}`}
      ${query.beforeSeq === undefined ? sql`` : sql`AND v.seq < ${query.beforeSeq}`}
      ORDER BY score DESC, v.seq DESC LIMIT ${Math.max(0, Math.floor(query.limit ?? DEFAULT_SEARCH_LIMIT))}
    ) s JOIN messages m ON m.session_id = s.session_id AND m.seq = s.seq AND m.created_at = s.created_at
    ORDER BY s.score DESC, m.seq DESC`;
  return rows.map((row) => vectorHit(row.session_id, toMessage(row), row.score));
}
