/**
 * The PostgreSQL store's IVF vector index (schema version 20, `postgres/_ivf.ts`): an owner past the
 * (lowered) threshold is indexed in the background after an exact scan, then served by the index with
 * recall@10 ≥ 0.9 against the exact answer on clustered vectors with few cells probed; a vector written
 * after the build is found; another owner's vectors never appear; erasing the owner drops its cells.
 */
import { afterAll, describe, expect, it } from "vitest";
import { serviceAvailable, TEST_POSTGRES_URL } from "../_services.js";
import {
  bigOwnerIndexed,
  clusteredVectors,
  MODEL,
  recallAt10,
  servedByIndex,
  vectorIndexStore,
  vectorSession,
} from "./_postgres-vectors.js";
import { uniqueSchema } from "./_postgres-stores.js";

const enabled = await serviceAvailable("postgres");

const PER_SESSION = 1000;
const SESSIONS = 2;
// 60 centres, each vector a centre plus smaller noise.
const vectors = clusteredVectors({ seed: 34, centres: 60, dims: 32 });

describe.skipIf(enabled !== true)("postgres vector index", () => {
  // Indexed from 1,000 vectors; 8 of the ~55 cells probed, no minimum read, so the probe is selective.
  const { store, admin, close } = vectorIndexStore({
    url: TEST_POSTGRES_URL,
    schema: uniqueSchema(),
    poolSize: 3,
    vectorIndex: { minOwnerVectors: 1000, probes: 8, minProbedVectors: 0, candidates: 40 },
  });
  afterAll(close);

  it("serves a large owner from the index with recall@10 ≥ 0.9, keeps it current, and never mixes owners", async () => {
    const { all, copies } = await bigOwnerIndexed(store, admin, {
      table: "vector_ivf",
      sessions: SESSIONS,
      perSession: PER_SESSION,
      copies: 200,
      vectors,
    });
    const [{ n: codes }] = await admin<{ n: number }[]>`SELECT count(*)::int AS n FROM vector_codes`;
    expect(codes).toBe(SESSIONS * PER_SESSION);
    expect((await admin`SELECT 1 FROM vector_ivf WHERE user_id = 'other'`).length).toBe(0);

    expect(
      await recallAt10(store, { owner: "big", all, queries: 30, vectors, notFrom: copies.id }),
    ).toBeGreaterThanOrEqual(0.9);

    // Served by the index: a vector whose code is moved to a cell no centroid has is no longer found.
    await servedByIndex(
      store,
      "big",
      all[123],
      () => admin`UPDATE vector_codes SET cell = -1 WHERE session_id = ${all[123].sessionId} AND seq = ${all[123].seq}`,
    );

    // A vector written after the build gets its code from the writer, and is found.
    const fresh = vectors.near(vectors.centres[7]);
    const added = await vectorSession(store, "big", [fresh]);
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
