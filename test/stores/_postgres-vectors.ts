/**
 * What the PostgreSQL vector index tests share (the IVF's, `postgres-vector-index`, and pgvector's
 * HNSW, `postgres-pgvector`): clustered vectors from a seed, an owner's sessions holding them one
 * message each, the exact answer, waiting for the background build, recall@10 of the index's
 * answers against the exact one, and that a search is served by the index.
 */
import postgres from "postgres";
import { expect } from "vitest";
import type { FullStore, VectorStore } from "../../src/core/types.js";
import { newSessionId } from "../../src/core/ids.js";
import { createPostgresStore, type PostgresStoreOptions } from "../../src/stores/postgres/index.js";
import { seededRandom } from "../../bench/_harness.js";
import { until } from "../_wait.js";

/** The embedding model the tests' vectors are stored under. */
export const MODEL = "m";

/**
 * A store (in `options.schema`, dropped by `close`, when given) and `admin`, a raw client of one
 * connection whose unqualified names resolve where the store's do. Both connect on first use.
 */
export function vectorIndexStore(options: PostgresStoreOptions) {
  const store = createPostgresStore(options);
  const admin = postgres(options.url, {
    max: 1,
    onnotice: () => {},
    fetch_types: false,
    ...(options.schema ? { connection: { search_path: options.schema } } : {}),
  });
  return {
    store,
    admin,
    async close() {
      await store.close();
      if (options.schema) await admin`DROP SCHEMA IF EXISTS ${admin(options.schema)} CASCADE`;
      await admin.end();
    },
  };
}

/** A vector scaled to length 1. */
export const unit = (v: number[]) => {
  const n = Math.hypot(...v);
  return v.map((x) => x / n);
};

/** Cosine similarity, as the store scores. */
export const cosine = (a: number[], b: number[]) => {
  const [ua, ub] = [unit(a), unit(b)];
  return ua.reduce((s, x, i) => s + x * ub[i], 0);
};

/** Clustered vectors, as embeddings are: `centres` random centres, each vector a centre plus smaller noise. */
export function clusteredVectors(options: { seed: number; centres: number; dims: number }) {
  const random = seededRandom(options.seed);
  const centres = Array.from({ length: options.centres }, () =>
    Array.from({ length: options.dims }, () => random() - 0.5),
  );
  const near = (c: number[]) => c.map((x) => x + (random() - 0.5) * 0.6);
  return {
    centres,
    /** A vector near the given centre. */
    near,
    /** A vector near a centre picked at random. */
    any: () => near(centres[Math.floor(random() * centres.length)]),
  };
}

/** A vector stored in a session, and its key in {@link hitKey}'s form. */
export interface StoredVector {
  sessionId: string;
  seq: number;
  vector: number[];
}

/** A hit's or a stored vector's `session:seq`. */
export const hitKey = (h: { sessionId: string; seq: number }) => `${h.sessionId}:${h.seq}`;

/** A new session of `owner` holding `vectors`, one message each. */
export async function vectorSession(store: FullStore & VectorStore, owner: string, vectors: number[][]) {
  const id = newSessionId();
  await store.createSession({ id, userId: owner });
  const added = await store.appendMessages(
    id,
    vectors.map((_, i) => ({ role: "user" as const, content: `${owner} ${i}` })),
  );
  await store.putEmbeddings(
    id,
    MODEL,
    added.map((m, i) => ({ seq: m.seq, createdAt: m.createdAt, vector: vectors[i] })),
  );
  return { id, added };
}

/** `sessions` sessions of `owner`, `perSession` vectors each from `next`: what they hold, in order. */
export async function ownerVectors(
  store: FullStore & VectorStore,
  owner: string,
  options: { sessions: number; perSession: number; next: () => number[] },
): Promise<StoredVector[]> {
  const all: StoredVector[] = [];
  for (let s = 0; s < options.sessions; s++) {
    const vectors = Array.from({ length: options.perSession }, options.next);
    const { id, added } = await vectorSession(store, owner, vectors);
    added.forEach((m, i) => all.push({ sessionId: id, seq: m.seq, vector: vectors[i] }));
  }
  return all;
}

/** The keys of the `k` vectors of `all` nearest `q`, best first. */
export const exactNearest = (all: StoredVector[], q: number[], k = 10) =>
  all
    .map((v) => ({ key: hitKey(v), score: cosine(q, v.vector) }))
    .sort((a, b) => b.score - a.score)
    .slice(0, k)
    .map((h) => h.key);

/** Waits until the owner has a ready registration in `table` (`vector_ivf` or `vector_hnsw`). */
export async function untilBuilt(admin: postgres.Sql, table: "vector_ivf" | "vector_hnsw", owner: string) {
  await until(
    `${owner}'s ${table} build is ready`,
    async () => (await admin`SELECT 1 FROM ${admin(table)} WHERE user_id = ${owner} AND ready`).length > 0,
    { timeoutMs: 60_000, everyMs: 50 },
  );
}

/**
 * The setup both index tests start with: `big`, an owner of `sessions` × `perSession` vectors, and
 * `other`, an owner holding copies of big's first `copies` (were ownership not checked, they would
 * tie); big's first search answers the exact nearest (a scan) and queues the build, which is waited
 * for in `table`.
 */
export async function bigOwnerIndexed(
  store: FullStore & VectorStore,
  admin: postgres.Sql,
  options: {
    table: "vector_ivf" | "vector_hnsw";
    sessions: number;
    perSession: number;
    copies: number;
    vectors: ReturnType<typeof clusteredVectors>;
  },
) {
  const all = await ownerVectors(store, "big", { ...options, next: options.vectors.any });
  const copies = await vectorSession(
    store,
    "other",
    all.slice(0, options.copies).map((v) => v.vector),
  );
  const first = await store.searchVectors({ userId: "big", model: MODEL, vector: all[5].vector, limit: 10 });
  expect(first.map(hitKey)).toEqual(exactNearest(all, all[5].vector));
  await untilBuilt(admin, options.table, "big");
  return { all, copies };
}

/**
 * The share of the exact 10 nearest that the store's searches of `owner` find, over `queries`
 * queries near the centres in turn; each search answers 10, none from `notFrom` (another owner's
 * session), each with its exact score.
 */
export async function recallAt10(
  store: FullStore & VectorStore,
  options: {
    owner: string;
    all: StoredVector[];
    queries: number;
    vectors: ReturnType<typeof clusteredVectors>;
    notFrom: string;
  },
): Promise<number> {
  const { owner, all, queries, vectors } = options;
  const byKey = new Map(all.map((v) => [hitKey(v), v.vector]));
  let found = 0;
  for (let i = 0; i < queries; i++) {
    const q = vectors.near(vectors.centres[i % vectors.centres.length]);
    const hits = await store.searchVectors({ userId: owner, model: MODEL, vector: q, limit: 10 });
    expect(hits).toHaveLength(10);
    expect(hits.every((h) => h.sessionId !== options.notFrom)).toBe(true);
    const want = new Set(exactNearest(all, q));
    found += hits.filter((h) => want.has(hitKey(h))).length;
    // Scores are exact (re-scored from the float vectors, or computed by pgvector).
    for (const h of hits) expect(h.score).toBeCloseTo(cosine(q, byKey.get(hitKey(h))!), 5);
  }
  return found / (queries * 10);
}

/**
 * That `target` is found through the index: it is the nearest to itself, and no longer once `hide`
 * has moved its entry in the index (not its vector) out of a search's reach.
 */
export async function servedByIndex(
  store: FullStore & VectorStore,
  owner: string,
  target: StoredVector,
  hide: () => Promise<unknown>,
) {
  const search = () => store.searchVectors({ userId: owner, model: MODEL, vector: target.vector, limit: 1 });
  expect((await search())[0]).toMatchObject({ sessionId: target.sessionId, seq: target.seq });
  await hide();
  expect((await search())[0]).not.toMatchObject({ sessionId: target.sessionId, seq: target.seq });
}
