/**
 * The SQLite store's IVF vector index (sqlite/_vector-index.ts): the embeddings conformance cases
 * with every owner indexed; recall against the exact scan on clustered vectors with few cells probed;
 * the index kept consistent with `message_vectors` through appends, replaced vectors, truncation,
 * deletion, expiry, erasure, growth and retraining, a restart, and writes by a connection without the
 * extension (an older process, or a platform without sqlite-vec's binary); and the earlier binary
 * index replaced.
 */
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newSessionId } from "../../src/core/ids.js";
import type { FullStore, VectorStore } from "../../src/core/types.js";
import { createSqliteStore, type SqliteStoreOptions } from "../../src/stores/sqlite/index.js";
import { describeVectors } from "../../src/testing/conformance-vectors.js";
import { seededRandom } from "../../bench/_harness.js";
import { sqliteTempFiles } from "./_sqlite-files.js";
import { until } from "../_wait.js";
import * as sqliteVec from "sqlite-vec";

const { freshPath } = sqliteTempFiles("threadkeep-sqlite-vector-index-");

describe("sqlite with every owner indexed", () => {
  let store: FullStore & VectorStore;
  beforeAll(() => {
    store = createSqliteStore({ path: freshPath(), vectorIndex: { minOwnerVectors: 1, background: false } });
  });
  afterAll(() => store.close());
  describeVectors(() => store, "sqlite (vector index)");
});

const MODEL = "m";
const DIMS = 32;
const random = seededRandom(24);
const vector = () => Array.from({ length: DIMS }, () => random() - 0.5);

/**
 * A store on `path` whose owners are indexed from 50 vectors on, re-scoring `candidates` of them;
 * built in the calling thread (at once), unless `background` (a worker thread, tested below).
 */
const open = (path: string, options: Partial<SqliteStoreOptions> = {}, background = false) => {
  const vectorIndex = options.vectorIndex ?? { minOwnerVectors: 50, candidates: 20 };
  return createSqliteStore({
    path,
    backgroundCheckpoints: false,
    ...options,
    vectorIndex: vectorIndex === false ? false : { ...vectorIndex, background },
  });
};

/** Creates a session of `owner` with `n` messages and their vectors; returns the session id and vectors. */
async function session(store: VectorStore, owner: string, n: number, lastActivityAt?: number) {
  const id = newSessionId();
  await store.createSession({ id, userId: owner });
  const added = await store.appendMessages(
    id,
    Array.from({ length: n }, (_, i) => ({ role: "user" as const, content: `${owner} ${i}` })),
  );
  const vectors = added.map(() => vector());
  await store.putEmbeddings(
    id,
    MODEL,
    added.map((m, i) => ({ seq: m.seq, createdAt: m.createdAt, vector: vectors[i] })),
  );
  if (lastActivityAt !== undefined) await store.touchSession(id, lastActivityAt);
  return { id, added, vectors };
}

const rows = (path: string, sql: string) => {
  const db = new Database(path, { readonly: true });
  try {
    return db.prepare(sql).pluck().get() as number;
  } finally {
    db.close();
  }
};

describe("sqlite vector index", () => {
  it("indexes an owner past the threshold only, and answers from the index with the exact scan's best hit", async () => {
    const path = freshPath();
    const store = open(path);
    try {
      const big = await session(store, "big", 120);
      const small = await session(store, "small", 10);
      const probe = big.vectors[7];
      // The first search scans exactly, then indexes the owner; the second goes through the index.
      const first = await store.searchVectors({ userId: "big", model: MODEL, vector: probe, limit: 5 });
      expect(rows(path, "SELECT count(*) FROM vector_index_owners WHERE user_id = 'big'")).toBe(1);
      expect(rows(path, "SELECT count(*) FROM vector_index_rows")).toBe(120);
      const second = await store.searchVectors({ userId: "big", model: MODEL, vector: probe, limit: 5 });
      expect(second[0]).toMatchObject({ sessionId: big.id, seq: 8 });
      expect(second[0].score).toBeCloseTo(1, 5);
      expect(second[0].message.content).toBe("big 7");
      // Re-scored exactly: the scores are the exact ones, whichever hits the candidates held.
      const exact = new Map(first.map((h) => [h.seq, h.score]));
      for (const hit of second) if (exact.has(hit.seq)) expect(hit.score).toBeCloseTo(exact.get(hit.seq)!, 6);
      await store.searchVectors({ userId: "small", model: MODEL, vector: small.vectors[0] });
      expect(rows(path, "SELECT count(*) FROM vector_index_owners WHERE user_id = 'small'")).toBe(0);
    } finally {
      await store.close();
    }
  });

  it("keeps the index consistent through appends, replaced vectors, truncation, deletion, expiry and a restart", async () => {
    const path = freshPath();
    let store = open(path);
    try {
      const a = await session(store, "owner", 60);
      const b = await session(store, "owner", 30);
      await store.searchVectors({ userId: "owner", model: MODEL, vector: a.vectors[0] }); // indexes the owner
      const top = async (v: number[], since?: number) =>
        (await store.searchVectors({ userId: "owner", model: MODEL, vector: v, limit: 3, activeSince: since }))[0];

      // A message appended and embedded after the owner was indexed is found.
      const fresh = vector();
      const [added] = await store.appendMessages(b.id, [{ role: "user", content: "fresh" }]);
      await store.putEmbeddings(b.id, MODEL, [{ seq: added.seq, createdAt: added.createdAt, vector: fresh }]);
      expect((await top(fresh)).message.content).toBe("fresh");
      // A replaced vector is found by its new value, and no longer by its old one.
      const replaced = vector();
      await store.putEmbeddings(a.id, MODEL, [
        { seq: a.added[3].seq, createdAt: a.added[3].createdAt, vector: replaced },
      ]);
      expect((await top(replaced)).seq).toBe(a.added[3].seq);
      expect((await top(a.vectors[3]))?.seq).not.toBe(a.added[3].seq);
      // Truncated messages are gone from the answers and from the index.
      await store.truncateAfter(a.id, 10);
      expect((await top(a.vectors[40])).seq).not.toBe(41);
      expect(rows(path, "SELECT count(*) FROM vector_index_rows")).toBe(10 + 31);

      // A restart keeps the index, its queues applied.
      await store.close();
      store = open(path);
      expect((await top(fresh)).message.content).toBe("fresh");
      expect(rows(path, "SELECT count(*) FROM vector_index_owners")).toBe(1);

      // An expired session (not swept yet) is never answered; with too few live candidates the exact
      // scan answers.
      const old = await session(store, "owner", 5, Date.now() - 86_400_000);
      const since = Date.now() - 3_600_000;
      expect((await top(old.vectors[2])).sessionId).toBe(old.id);
      expect((await top(old.vectors[2], since)).sessionId).not.toBe(old.id);
      expect(await store.expire(since)).toEqual([old.id]);

      // A deleted session's vectors go from the index.
      await store.deleteSession(b.id);
      expect((await top(fresh)).sessionId).toBe(a.id);
      expect(rows(path, "SELECT count(*) FROM vector_index_rows")).toBe(10);
      expect(
        rows(path, "SELECT count(*) FROM vector_index_gone") + rows(path, "SELECT count(*) FROM vector_index_queue"),
      ).toBe(0);
    } finally {
      await store.close();
    }
  });

  it("catches up on writes made by a connection without sqlite-vec", async () => {
    const path = freshPath();
    const store = open(path);
    try {
      const a = await session(store, "owner", 60);
      await store.searchVectors({ userId: "owner", model: MODEL, vector: a.vectors[0] });
      const [added] = await store.appendMessages(a.id, [{ role: "user", content: "written elsewhere" }]);
      await store.close();

      // An older threadkeep, or one where sqlite-vec has no binary: plain SQL, triggers only.
      const plain = new Database(path);
      const elsewhere = vector();
      const packed = Buffer.alloc(DIMS * 4);
      const norm = Math.hypot(...elsewhere);
      elsewhere.forEach((x, i) => packed.writeFloatLE(x / norm, i * 4));
      plain
        .prepare("INSERT INTO message_vectors (session_id, seq, created_at, model, vector) VALUES (?, ?, ?, ?, ?)")
        .run(a.id, added.seq, added.createdAt, MODEL, packed);
      plain.prepare("DELETE FROM messages WHERE session_id = ? AND seq <= 5").run(a.id);
      plain.close();

      const reopened = open(path);
      try {
        const hits = await reopened.searchVectors({ userId: "owner", model: MODEL, vector: elsewhere, limit: 60 });
        expect(hits[0].message.content).toBe("written elsewhere");
        expect(hits.some((h) => h.seq <= 5)).toBe(false);
        expect(rows(path, "SELECT count(*) FROM vector_index_rows")).toBe(60 - 5 + 1);
      } finally {
        await reopened.close();
      }
    } finally {
      await store.close();
    }
  });

  it("scans exactly with `vectorIndex: false`, leaving an existing index to the next indexed store", async () => {
    const path = freshPath();
    const indexed = open(path);
    const a = await session(indexed, "owner", 60);
    await indexed.searchVectors({ userId: "owner", model: MODEL, vector: a.vectors[0] });
    await indexed.close();
    const plain = open(path, { vectorIndex: false });
    try {
      const hits = await plain.searchVectors({ userId: "owner", model: MODEL, vector: a.vectors[9], limit: 60 });
      expect(hits).toHaveLength(60);
      expect(hits[0].seq).toBe(10);
    } finally {
      await plain.close();
    }
  });
});

/** Normalised vectors around `centres` random directions (a cosine of about 0.7 to the centre). */
function clusteredVectors(dims: number, centres: number, seed: number) {
  const random = seededRandom(seed);
  const gauss = () => Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());
  const unit = (v: number[]) => {
    const norm = Math.hypot(...v);
    return v.map((x) => x / norm);
  };
  const c = Array.from({ length: centres }, () => unit(Array.from({ length: dims }, gauss)));
  return () => unit(c[Math.floor(random() * centres)].map((x) => x + gauss() / Math.sqrt(dims)));
}

/** Fills `sessions` sessions of `owner` with `perSession` messages whose vectors come from `draw`. */
async function fillOwner(
  store: VectorStore,
  owner: string,
  sessions: number,
  perSession: number,
  draw: () => number[],
) {
  const ids: string[] = [];
  for (let s = 0; s < sessions; s++) {
    const id = newSessionId();
    ids.push(id);
    await store.createSession({ id, userId: owner });
    const added = await store.appendMessages(
      id,
      Array.from({ length: perSession }, (_, i) => ({ role: "user" as const, content: `${owner} ${s}.${i}` })),
    );
    await store.putEmbeddings(
      id,
      MODEL,
      added.map((m) => ({ seq: m.seq, createdAt: m.createdAt, vector: draw() })),
    );
  }
  return ids;
}

const keys = (hits: { sessionId: string; seq: number }[]) => hits.map((h) => `${h.sessionId}:${h.seq}`);
const settle = async () => {
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
};

describe("sqlite IVF index", () => {
  it("finds the exact scan's top 10 on clustered vectors while probing a few of its cells", async () => {
    const path = freshPath();
    const draw = clusteredVectors(DIMS, 12, 5);
    const exact = open(path, { vectorIndex: false });
    // 3,000 vectors: 55 cells of about 55; 6 probed cells read about a tenth of them.
    await fillOwner(exact, "owner", 30, 100, draw);
    const indexed = open(path, {
      vectorIndex: { minOwnerVectors: 1000, probes: 6, candidates: 120, minProbedVectors: 0 },
    });
    try {
      await indexed.searchVectors({ userId: "owner", model: MODEL, vector: draw() }); // trains and builds
      expect(rows(path, "SELECT count(*) FROM vector_index_rows")).toBe(3000);
      const cells = rows(path, "SELECT length(centroids) / 4 / " + DIMS + " FROM vector_index_owners");
      expect(cells).toBe(55);
      let found = 0;
      for (let q = 0; q < 20; q++) {
        const vector = draw();
        const want = keys(await exact.searchVectors({ userId: "owner", model: MODEL, vector, limit: 10 }));
        const got = keys(await indexed.searchVectors({ userId: "owner", model: MODEL, vector, limit: 10 }));
        found += got.filter((k) => want.includes(k)).length;
      }
      expect(found / 200).toBeGreaterThanOrEqual(0.9);
      // With one cell probed, the answer is approximate: fewer of the exact top 10.
      const narrow = open(path, {
        vectorIndex: { minOwnerVectors: 1000, probes: 1, candidates: 10, minProbedVectors: 0 },
      });
      let narrowFound = 0;
      for (let q = 0; q < 20; q++) {
        const vector = draw();
        const want = keys(await exact.searchVectors({ userId: "owner", model: MODEL, vector, limit: 10 }));
        const got = keys(await narrow.searchVectors({ userId: "owner", model: MODEL, vector, limit: 10 }));
        narrowFound += got.filter((k) => want.includes(k)).length;
      }
      await narrow.close();
      expect(narrowFound).toBeLessThan(found);
    } finally {
      await indexed.close();
      await exact.close();
    }
  });

  it("puts vectors added after training in their nearest cell, and trains again once the owner doubled", async () => {
    const path = freshPath();
    const draw = clusteredVectors(DIMS, 6, 9);
    const store = open(path, { vectorIndex: { minOwnerVectors: 200, probes: 4, candidates: 40 } });
    try {
      await fillOwner(store, "owner", 4, 50, draw);
      await store.searchVectors({ userId: "owner", model: MODEL, vector: draw() }); // trains on 200
      const generation = () => rows(path, "SELECT generation FROM vector_index_owners WHERE user_id = 'owner'");
      expect(generation()).toBe(1);
      expect(rows(path, "SELECT trained FROM vector_index_owners")).toBe(200);

      // Added after training: in the index at once, found by their own vector.
      const [later] = await fillOwner(store, "owner", 1, 150, draw);
      expect(rows(path, "SELECT size FROM vector_index_owners")).toBe(350);
      expect(rows(path, "SELECT count(*) FROM vector_index_rows")).toBe(350);
      const probe = draw();
      const [added] = await store.appendMessages(later, [{ role: "user", content: "added late" }]);
      await store.putEmbeddings(later, MODEL, [{ seq: added.seq, createdAt: added.createdAt, vector: probe }]);
      expect(
        (await store.searchVectors({ userId: "owner", model: MODEL, vector: probe, limit: 1 }))[0].message.content,
      ).toBe("added late");
      await settle();
      expect(generation()).toBe(1);

      // Past twice the trained size: the search answers from the old cells, the training follows it.
      await fillOwner(store, "owner", 1, 60, draw);
      const hits = await store.searchVectors({ userId: "owner", model: MODEL, vector: probe, limit: 1 });
      expect(hits[0].message.content).toBe("added late");
      expect(generation()).toBe(1);
      await settle();
      expect(generation()).toBe(2);
      expect(rows(path, "SELECT trained FROM vector_index_owners")).toBe(411);
      expect(rows(path, "SELECT size FROM vector_index_owners")).toBe(411);
      expect(rows(path, "SELECT count(*) FROM vector_index_rows")).toBe(411);
      expect(rows(path, "SELECT length(centroids) / 4 / " + DIMS + " FROM vector_index_owners")).toBe(20);
      expect(
        (await store.searchVectors({ userId: "owner", model: MODEL, vector: probe, limit: 1 }))[0].message.content,
      ).toBe("added late");
    } finally {
      await store.close();
    }
  });

  it("forgets an erased owner's vectors and centroids, and never answers with another owner's", async () => {
    const path = freshPath();
    const draw = clusteredVectors(DIMS, 4, 13);
    const store = open(path);
    try {
      const gone = await fillOwner(store, "erased", 3, 40, draw);
      const kept = await fillOwner(store, "kept", 2, 40, draw);
      await store.searchVectors({ userId: "erased", model: MODEL, vector: draw() });
      await store.searchVectors({ userId: "kept", model: MODEL, vector: draw() });
      expect(rows(path, "SELECT count(*) FROM vector_index_owners")).toBe(2);
      // Same vectors in both owners' cells: a search of one never returns the other's.
      const hits = await store.searchVectors({ userId: "kept", model: MODEL, vector: draw(), limit: 80 });
      expect(hits.every((h) => kept.includes(h.sessionId))).toBe(true);

      for (const id of gone) await store.deleteSession(id);
      await store.searchVectors({ userId: "kept", model: MODEL, vector: draw() }); // applies the queues
      expect(rows(path, "SELECT count(*) FROM vector_index_owners WHERE user_id = 'erased'")).toBe(0);
      expect(rows(path, "SELECT count(*) FROM vector_index_rows WHERE user_id = 'erased'")).toBe(0);
      expect(rows(path, "SELECT count(*) FROM vector_index_rows")).toBe(80);
      expect(await store.searchVectors({ userId: "erased", model: MODEL, vector: draw() })).toEqual([]);
    } finally {
      await store.close();
    }
  });

  it("replaces the earlier binary index of a file with cells", async () => {
    const path = freshPath();
    const store = open(path);
    const a = await session(store, "owner", 60);
    await store.close();
    // The binary index's objects as an earlier threadkeep created them.
    const db = new Database(path);
    sqliteVec.load(db);
    db.exec(`
      CREATE TABLE vector_index_owners (model TEXT NOT NULL, user_id TEXT NOT NULL, PRIMARY KEY (model, user_id)) WITHOUT ROWID;
      CREATE TABLE vector_index_rows (id INTEGER PRIMARY KEY, session_id TEXT NOT NULL, seq INTEGER NOT NULL, model TEXT NOT NULL, UNIQUE (session_id, seq));
      CREATE TABLE vector_index_queue (session_id TEXT NOT NULL, seq INTEGER NOT NULL, PRIMARY KEY (session_id, seq)) WITHOUT ROWID;
      CREATE TABLE vector_index_gone (id INTEGER PRIMARY KEY);
      CREATE TRIGGER message_vectors_index_delete AFTER DELETE ON message_vectors BEGIN
        INSERT OR IGNORE INTO vector_index_gone SELECT id FROM vector_index_rows WHERE session_id = old.session_id AND seq = old.seq;
      END;
      CREATE VIRTUAL TABLE vector_index_m1 USING vec0(user_id TEXT PARTITION KEY, bits BIT[32]);
      INSERT INTO vector_index_owners VALUES ('${MODEL}', 'owner');`);
    db.close();
    const reopened = open(path);
    try {
      expect(
        (await reopened.searchVectors({ userId: "owner", model: MODEL, vector: a.vectors[4], limit: 1 }))[0].seq,
      ).toBe(5);
      expect(rows(path, "SELECT count(*) FROM sqlite_master WHERE name GLOB 'vector_index_m1*'")).toBe(0);
      expect(rows(path, "SELECT count(*) FROM vector_index_rows")).toBe(60);
      expect(
        (await reopened.searchVectors({ userId: "owner", model: MODEL, vector: a.vectors[4], limit: 1 }))[0].seq,
      ).toBe(5);
    } finally {
      await reopened.close();
    }
  });
});

describe("sqlite IVF index built in a worker thread", () => {
  const generation = (path: string) =>
    rows(path, "SELECT coalesce(max(generation), 0) FROM vector_index_owners WHERE user_id = 'owner'");
  // A worker that loads the TypeScript source takes a second or two to start on a loaded machine.
  const built = (path: string, n: number) =>
    until(`generation ${n} is written`, () => generation(path) >= n, { timeoutMs: 30_000 });

  it("answers exactly while the worker builds, then from the index; trains again in the worker, with the writes made meanwhile", async () => {
    const path = freshPath();
    const draw = clusteredVectors(DIMS, 6, 31);
    const store = open(path, { vectorIndex: { minOwnerVectors: 200, probes: 4, candidates: 40 } }, true);
    try {
      await fillOwner(store, "owner", 4, 50, draw);
      const probe = draw();
      const exact = await store.searchVectors({ userId: "owner", model: MODEL, vector: probe, limit: 10 });
      // The search returned before any build was written: the build is the worker's.
      expect(
        rows(path, "SELECT count(*) FROM sqlite_master WHERE name = 'vector_index_owners'") === 0 ||
          generation(path) === 0,
      ).toBe(true);
      // Written while the worker plans: placed by its write, not lost (a first build has no queue yet).
      const [late] = await fillOwner(store, "owner", 1, 5, draw);
      await built(path, 1);
      expect(rows(path, "SELECT count(*) FROM vector_index_rows")).toBe(205);
      expect(rows(path, "SELECT size FROM vector_index_owners")).toBe(205);
      const indexed = await store.searchVectors({ userId: "owner", model: MODEL, vector: probe, limit: 10 });
      expect(keys(indexed).slice(0, 5)).toEqual(keys(exact).slice(0, 5));
      const lateVectors = rows(path, `SELECT count(*) FROM vector_index_rows WHERE session_id = '${late}'`);
      expect(lateVectors).toBe(5);

      // Past twice the trained size: the search answers from the old cells, the worker trains again.
      await fillOwner(store, "owner", 1, 200, draw);
      await store.searchVectors({ userId: "owner", model: MODEL, vector: probe, limit: 1 });
      await built(path, 2);
      expect(rows(path, "SELECT trained FROM vector_index_owners")).toBe(405);
      // The replaced cells' rows go after the swap, a slice at a time.
      await until("the old cells are removed", () => rows(path, "SELECT count(*) FROM vector_index_rows") === 405);
      expect(
        rows(path, "SELECT count(*) FROM vector_index_queue") + rows(path, "SELECT count(*) FROM vector_index_gone"),
      ).toBe(0);
    } finally {
      await store.close();
    }
  }, 60_000);

  it("a close stops a build under way: nothing of it is published, and the next store builds again", async () => {
    const path = freshPath();
    const draw = clusteredVectors(DIMS, 6, 37);
    const store = open(path, { vectorIndex: { minOwnerVectors: 200 } }, true);
    await fillOwner(store, "owner", 4, 60, draw);
    await store.searchVectors({ userId: "owner", model: MODEL, vector: draw() });
    await store.close();
    expect(generation(path)).toBe(0);
    const again = open(path, { vectorIndex: { minOwnerVectors: 200 } }, true);
    try {
      await again.searchVectors({ userId: "owner", model: MODEL, vector: draw() });
      await built(path, 1);
      await until(
        "what the stopped build wrote is removed",
        () => rows(path, "SELECT count(*) FROM vector_index_rows") === 240,
      );
    } finally {
      await again.close();
    }
  }, 60_000);
});
