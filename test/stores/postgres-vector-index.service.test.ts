/**
 * The PostgreSQL store's IVF vector index (schema version 20, `postgres/_ivf.ts`): an owner past the
 * (lowered) threshold is indexed in the background after an exact scan, then served by the index with
 * recall@10 ≥ 0.9 against the exact answer on clustered vectors with few cells probed; a vector written
 * after the build is found; another owner's vectors never appear; erasing the owner drops its cells.
 */
import { randomBytes } from "node:crypto";
import postgres from "postgres";
import { afterAll, describe, expect, it } from "vitest";
import { newSessionId } from "../../src/core/ids.js";
import { createPostgresStore } from "../../src/stores/postgres/index.js";
import { seededRandom } from "../../bench/_harness.js";
import { serviceAvailable, TEST_POSTGRES_URL } from "../_services.js";

const enabled = await serviceAvailable("postgres");
const schema = `tk_test_${randomBytes(6).toString("hex")}`;

const MODEL = "m";
const DIMS = 32;
const PER_SESSION = 1000;
const SESSIONS = 2;
const random = seededRandom(34);
// Clustered, as embeddings are: 60 centres, each vector a centre plus smaller noise.
const centres = Array.from({ length: 60 }, () => Array.from({ length: DIMS }, () => random() - 0.5));
const near = (c: number[]) => c.map((x) => x + (random() - 0.5) * 0.6);
const unit = (v: number[]) => {
  const n = Math.hypot(...v);
  return v.map((x) => x / n);
};
const cosine = (a: number[], b: number[]) => {
  const [ua, ub] = [unit(a), unit(b)];
  return ua.reduce((s, x, i) => s + x * ub[i], 0);
};

describe.skipIf(enabled !== true)("postgres vector index", () => {
  // Indexed from 1,000 vectors; 8 of the ~55 cells probed, no minimum read, so the probe is selective.
  const store = createPostgresStore({
    url: TEST_POSTGRES_URL,
    schema,
    poolSize: 3,
    vectorIndex: { minOwnerVectors: 1000, probes: 8, minProbedVectors: 0, candidates: 40 },
  });
  const admin = postgres(TEST_POSTGRES_URL, { max: 1, onnotice: () => {}, connection: { search_path: schema } });
  afterAll(async () => {
    await store.close();
    await admin.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await admin.end();
  });

  /** A session of `owner` holding `vectors`, one message each. */
  async function session(owner: string, vectors: number[][]) {
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

  it("serves a large owner from the index with recall@10 ≥ 0.9, keeps it current, and never mixes owners", async () => {
    const all: { sessionId: string; seq: number; vector: number[] }[] = [];
    for (let s = 0; s < SESSIONS; s++) {
      const vectors = Array.from({ length: PER_SESSION }, () => near(centres[Math.floor(random() * centres.length)]));
      const { id, added } = await session("big", vectors);
      added.forEach((m, i) => all.push({ sessionId: id, seq: m.seq, vector: vectors[i] }));
    }
    // Another owner holding copies of big's first vectors: were ownership not in the probe, they would tie.
    const copies = await session(
      "other",
      all.slice(0, 200).map((v) => v.vector),
    );
    const exact = (q: number[], k = 10) =>
      all
        .map((v) => ({ key: `${v.sessionId}:${v.seq}`, score: cosine(q, v.vector) }))
        .sort((a, b) => b.score - a.score)
        .slice(0, k)
        .map((h) => h.key);

    // The first search scans exactly and starts the build in the background.
    const first = await store.searchVectors({ userId: "big", model: MODEL, vector: all[5].vector, limit: 10 });
    expect(first.map((h) => `${h.sessionId}:${h.seq}`)).toEqual(exact(all[5].vector));
    const deadline = Date.now() + 60_000;
    while ((await admin`SELECT 1 FROM vector_ivf WHERE user_id = 'big' AND ready`).length === 0) {
      expect(Date.now()).toBeLessThan(deadline);
      await new Promise((r) => setTimeout(r, 50));
    }
    const [{ n: codes }] = await admin<{ n: number }[]>`SELECT count(*)::int AS n FROM vector_codes`;
    expect(codes).toBe(SESSIONS * PER_SESSION);
    expect((await admin`SELECT 1 FROM vector_ivf WHERE user_id = 'other'`).length).toBe(0);

    const byKey = new Map(all.map((v) => [`${v.sessionId}:${v.seq}`, v.vector]));
    let found = 0;
    const queries = 30;
    for (let i = 0; i < queries; i++) {
      const q = near(centres[i % centres.length]);
      const hits = await store.searchVectors({ userId: "big", model: MODEL, vector: q, limit: 10 });
      expect(hits).toHaveLength(10);
      expect(hits.every((h) => h.sessionId !== copies.id)).toBe(true);
      const want = new Set(exact(q));
      found += hits.filter((h) => want.has(`${h.sessionId}:${h.seq}`)).length;
      // Scores are exact (re-scored from the float vectors).
      for (const h of hits) expect(h.score).toBeCloseTo(cosine(q, byKey.get(`${h.sessionId}:${h.seq}`)!), 5);
    }
    expect(found / (queries * 10)).toBeGreaterThanOrEqual(0.9);

    // Served by the index: a vector whose code is moved to a cell no centroid has is no longer found.
    const target = all[123];
    const before = await store.searchVectors({ userId: "big", model: MODEL, vector: target.vector, limit: 1 });
    expect(before[0]).toMatchObject({ sessionId: target.sessionId, seq: target.seq });
    await admin`UPDATE vector_codes SET cell = -1 WHERE session_id = ${target.sessionId} AND seq = ${target.seq}`;
    const after = await store.searchVectors({ userId: "big", model: MODEL, vector: target.vector, limit: 1 });
    expect(after[0]).not.toMatchObject({ sessionId: target.sessionId, seq: target.seq });

    // A vector written after the build gets its code from the writer, and is found.
    const fresh = near(centres[7]);
    const added = await session("big", [fresh]);
    const hit = await store.searchVectors({ userId: "big", model: MODEL, vector: fresh, limit: 3 });
    expect(hit[0]).toMatchObject({ sessionId: added.id, seq: added.added[0].seq });

    // The other owner sees only its own.
    const theirs = await store.searchVectors({ userId: "other", model: MODEL, vector: all[5].vector, limit: 10 });
    expect(theirs.every((h) => h.sessionId === copies.id)).toBe(true);

    // Deleting the owner's last session drops its cells (averages of its vectors) and codes.
    const ids = [...new Set(all.map((v) => v.sessionId)), added.id];
    for (const id of ids.slice(1)) await store.deleteSession(id);
    expect((await admin`SELECT 1 FROM vector_ivf WHERE user_id = 'big'`).length).toBe(1);
    await store.deleteSession(ids[0]);
    expect((await admin`SELECT 1 FROM vector_ivf`).length).toBe(0);
    expect((await admin`SELECT 1 FROM vector_codes`).length).toBe(0);
  }, 120_000);
});
