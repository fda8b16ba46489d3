/**
 * The PostgreSQL store on a database with the `vector` extension (pgvector): a large owner is indexed
 * with pgvector's HNSW instead of the IVF in SQL, searched with recall@10 ≥ 0.9 against the exact
 * answer, kept current by writers, never mixing owners, dropped with the owner; `/readyz` says which
 * index is in use. The server is PGlite (PostgreSQL compiled to WASM, from npm, with pgvector) served
 * over the wire protocol by pglite-socket on 127.0.0.1, so the test needs nothing but npm. Then the
 * shared test server (no pgvector in Debian's packages): the store says it uses the IVF, and why.
 */
import type { AddressInfo } from "node:net";
import { PGlite } from "@electric-sql/pglite";
import { vector } from "@electric-sql/pglite-pgvector";
import { PGLiteSocketServer } from "@electric-sql/pglite-socket";
import type postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPostgresStore } from "../../src/stores/postgres/index.js";
import { serviceAvailable, TEST_POSTGRES_URL } from "../_services.js";
import { type Stack, startStack } from "../server/_stack.js";
import {
  bigOwnerIndexed,
  clusteredVectors,
  MODEL,
  recallAt10,
  servedByIndex,
  unit,
  vectorIndexStore,
  vectorSession,
} from "./_postgres-vectors.js";
import { uniqueSchema } from "./_postgres-stores.js";

const DIMS = 32;
const vectors = clusteredVectors({ seed: 35, centres: 40, dims: DIMS });

describe("postgres store with pgvector (PGlite over the wire protocol)", () => {
  let db: PGlite;
  let server: PGLiteSocketServer;
  let opened: ReturnType<typeof vectorIndexStore>;
  let store: ReturnType<typeof vectorIndexStore>["store"];
  let admin: postgres.Sql;
  let stack: Stack | undefined;

  beforeAll(async () => {
    db = await PGlite.create({ extensions: { vector } });
    server = new PGLiteSocketServer({ db, port: 0, host: "127.0.0.1", maxConnections: 8 });
    await server.start();
    const port = ((server as unknown as { server: { address(): AddressInfo } }).server.address() as AddressInfo).port;
    // PGlite is one backend: the socket server queues its connections' statements onto it.
    opened = vectorIndexStore({
      url: `postgres://postgres@127.0.0.1:${port}/postgres`,
      poolSize: 1,
      queryTimeoutMs: 20_000,
      vectorIndex: { minOwnerVectors: 500, candidates: 40 },
    });
    ({ store, admin } = opened);
  }, 60_000);
  afterAll(async () => {
    await stack?.close();
    await opened?.close();
    await server?.stop();
    await db?.close();
  });

  it("indexes a large owner with HNSW, finds its nearest with recall@10 ≥ 0.9, keeps it current, never mixes owners", async () => {
    expect(await store.describeVectorIndex()).toEqual({
      kind: "pgvector-hnsw",
      pgvector: expect.stringMatching(/^0\.\d+/),
    });
    const { all, copies } = await bigOwnerIndexed(store, admin, {
      table: "vector_hnsw",
      sessions: 2,
      perSession: 400,
      copies: 100,
      vectors,
    });
    const [{ n: rows }] = await admin<{ n: number }[]>`SELECT count(*)::int AS n FROM vector_hnsw_rows`;
    expect(rows).toBe(all.length);
    const [index] = await admin<{ def: string }[]>`
      SELECT pg_get_indexdef(c.oid) AS def FROM pg_class c WHERE c.relname LIKE 'vector\\_hnsw\\_%' AND c.relkind = 'i'
        AND c.relname ~ '^vector_hnsw_[0-9]+$'`;
    expect(index.def).toMatch(/USING hnsw .*vector_ip_ops\).*WHERE \(hnsw = /);
    // The search's ordering and filter match the index (other scans ruled out, as at a large owner's size).
    const [{ id }] = await admin<{ id: string }[]>`SELECT id FROM vector_hnsw WHERE user_id = 'big'`;
    const plan = await admin.begin(async (tx) => {
      await tx`SET LOCAL enable_seqscan = off`;
      await tx`SET LOCAL enable_bitmapscan = off`;
      return tx.unsafe(
        `EXPLAIN SELECT session_id, seq FROM vector_hnsw_rows r WHERE r.hnsw = ${Number(id)}
         ORDER BY (embedding::vector(${DIMS})) <#> '[${unit(all[0].vector).join(",")}]'::vector LIMIT 40`,
      );
    });
    expect(plan.map((r) => r["QUERY PLAN"]).join("\n")).toContain(`Index Scan using vector_hnsw_${id}`);
    expect((await admin`SELECT 1 FROM vector_hnsw WHERE user_id = 'other'`).length).toBe(0);
    // No IVF training was made.
    expect((await admin`SELECT 1 FROM vector_ivf`).length).toBe(0);

    expect(
      await recallAt10(store, { owner: "big", all, queries: 30, vectors, notFrom: copies.id }),
    ).toBeGreaterThanOrEqual(0.9);

    // Served by the index: a vector whose copy is moved far away is no longer found first.
    const target = all[123];
    const away = `[${unit(target.vector)
      .map((x) => -x)
      .join(",")}]`;
    await servedByIndex(
      store,
      "big",
      target,
      () =>
        admin`UPDATE vector_hnsw_rows SET embedding = ${away}::vector WHERE session_id = ${target.sessionId} AND seq = ${target.seq}`,
    );

    // A vector written after the build is copied by the writer, and found.
    const fresh = vectors.near(vectors.centres[7]);
    const added = await vectorSession(store, "big", [fresh]);
    const hit = await store.searchVectors({ userId: "big", model: MODEL, vector: fresh, limit: 3 });
    expect(hit[0]).toMatchObject({ sessionId: added.id, seq: added.added[0].seq });

    // Filters apply to the index's candidates.
    const later = await store.searchVectors({
      userId: "big",
      model: MODEL,
      vector: all[5].vector,
      limit: 5,
      afterSeq: 300,
    });
    expect(later.length).toBeGreaterThan(0);
    expect(later.every((h) => h.seq > 300)).toBe(true);

    const theirs = await store.searchVectors({ userId: "other", model: MODEL, vector: all[5].vector, limit: 10 });
    expect(theirs.every((h) => h.sessionId === copies.id)).toBe(true);

    // /readyz says which index is in use.
    stack = await startStack({ store });
    const ready = await stack.request("GET", "/readyz");
    expect(await ready.json()).toMatchObject({
      status: "ok",
      store: "postgres",
      vectorIndex: { kind: "pgvector-hnsw" },
    });

    // Deleting the owner's sessions drops its registration and copies.
    for (const id of [...new Set(all.map((v) => v.sessionId)), added.id]) await store.deleteSession(id);
    expect((await admin`SELECT 1 FROM vector_hnsw`).length).toBe(0);
    expect((await admin`SELECT 1 FROM vector_hnsw_rows`).length).toBe(0);
  }, 180_000);
});

const enabled = await serviceAvailable("postgres");

describe.skipIf(enabled !== true)("postgres store without pgvector", () => {
  it("says it uses the IVF in SQL, and why not pgvector", async () => {
    const schema = uniqueSchema();
    const { store, admin, close } = vectorIndexStore({ url: TEST_POSTGRES_URL, schema });
    try {
      const [offered] = await admin`SELECT 1 FROM pg_available_extensions WHERE name = 'vector'`;
      const described = await store.describeVectorIndex();
      if (offered) expect(described.kind).toBe("pgvector-hnsw");
      else
        expect(described).toEqual({
          kind: "ivf-sql",
          pgvector: "not used: the server has no vector extension (pgvector) to install",
        });
      const off = createPostgresStore({ url: TEST_POSTGRES_URL, schema, vectorIndex: { pgvector: false } });
      expect(await off.describeVectorIndex()).toEqual({
        kind: "ivf-sql",
        pgvector: "not used: vectorIndex.pgvector is false",
      });
      await off.close();
    } finally {
      await close();
    }
  });
});
