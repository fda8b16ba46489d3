/**
 * A vector index build written in short transactions (sqlite/_vector-index.ts `writeOwnerIndex`) and
 * interrupted before it was published, as a worker killed between two of them leaves it: the build
 * registered, some of its rows written under its own partition keys. Searches go on answering from
 * the published cells, exactly as before; writes meanwhile reach both; the next build supersedes it,
 * publishes, and removes its rows and the replaced cells' rows. And two builds of one owner at once
 * (two processes, or two stores, both searching it): the later one does not supersede the one being
 * written, which publishes.
 */
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { newSessionId } from "../../src/core/ids.js";
import type { VectorHit, VectorStore } from "../../src/core/types.js";
import {
  loadVectorExtension,
  planOwnerIndex,
  STALE_BUILD_MS,
  writeOwnerIndex,
} from "../../src/stores/sqlite/_vector-index.js";
import { createSqliteStore } from "../../src/stores/sqlite/index.js";
import { seededRandom } from "../../bench/_harness.js";
import { sqliteTempFiles } from "../stores/_sqlite-files.js";

const { freshPath } = sqliteTempFiles("threadkeep-sqlite-vector-builds-");
const MODEL = "m";
const DIMS = 16;
const random = seededRandom(3401);
const vector = () => Array.from({ length: DIMS }, () => random() - 0.5);

async function session(store: VectorStore, n: number) {
  const id = newSessionId();
  await store.createSession({ id, userId: "owner" });
  const added = await store.appendMessages(
    id,
    Array.from({ length: n }, (_, i) => ({ role: "user" as const, content: `${id} ${i}` })),
  );
  const vectors = added.map(() => vector());
  await store.putEmbeddings(
    id,
    MODEL,
    added.map((m, i) => ({ seq: m.seq, createdAt: m.createdAt, vector: vectors[i] })),
  );
  return { id, vectors };
}

const keys = (hits: VectorHit[]) => hits.map((h) => `${h.sessionId}/${h.message.seq}`);

describe("sqlite vector index build interrupted before it was published", () => {
  it("is never read, is kept up to date meanwhile, and is removed by the next build", async () => {
    const path = freshPath();
    // Every cell probed and every candidate re-scored: the index answers as the exact scan does, so any
    // row of the half-build read by a search (a duplicate, a stale vector) would show.
    const store = createSqliteStore({
      path,
      backgroundCheckpoints: false,
      vectorIndex: { minOwnerVectors: 50, probes: 10_000, candidates: 10_000, background: false },
    });
    const exact = createSqliteStore({ path, backgroundCheckpoints: false, vectorIndex: false });
    const sessions = [await session(store, 100), await session(store, 100)];
    const db = new Database(path);
    const one = (sql: string) => db.prepare(sql).pluck().get() as number;
    try {
      const probe = vector();
      await store.searchVectors({ userId: "owner", model: MODEL, vector: probe, limit: 10 });
      const published = one("SELECT build FROM vector_index_owners");
      expect(one("SELECT generation FROM vector_index_owners")).toBe(1);

      // Another build of the owner (on a connection of its own, as the worker's), stopped for good after
      // its first transaction of rows.
      sessions.push(await session(store, 100));
      expect(loadVectorExtension(db)).toBe(true);
      const plan = planOwnerIndex(db, "owner", MODEL, 300)!;
      expect(() =>
        writeOwnerIndex(db, plan, {
          pause: () => {
            throw new Error("the worker is gone");
          },
        }),
      ).toThrow("the worker is gone");
      const half = one("SELECT id FROM vector_index_builds");
      // Its worker killed over a minute ago (STALE_BUILD_MS): its registration no longer holds the claim.
      db.prepare("UPDATE vector_index_builds SET touched_at = touched_at - ?").run(STALE_BUILD_MS + 1);
      expect(half).toBeGreaterThan(published);
      expect(one(`SELECT count(*) FROM vector_index_rows WHERE build = ${half}`)).toBeGreaterThan(0);
      expect(one("SELECT build FROM vector_index_owners")).toBe(published);

      // Writes meanwhile: new vectors, a replaced one and a deleted session reach the published cells
      // and the half-build alike.
      sessions.push(await session(store, 20));
      const [first] = sessions;
      const replaced = vector();
      const [m1] = await store.getMessages(first.id, { limit: 1 });
      await store.putEmbeddings(first.id, MODEL, [{ seq: m1.seq, createdAt: m1.createdAt, vector: replaced }]);
      await store.deleteSession(sessions[1].id);
      expect(
        one(`SELECT count(*) FROM vector_index_rows WHERE build = ${half} AND session_id = '${sessions[3].id}'`),
      ).toBe(20);
      const searches = [probe, replaced, sessions[3].vectors[7], vector()];
      for (const q of searches) {
        const indexed = await store.searchVectors({ userId: "owner", model: MODEL, vector: q, limit: 10 });
        expect(keys(indexed)).toEqual(
          keys(await exact.searchVectors({ userId: "owner", model: MODEL, vector: q, limit: 10 })),
        );
      }
      expect(one("SELECT build FROM vector_index_owners")).toBe(published);
      expect(one("SELECT size FROM vector_index_owners")).toBe(220);
      expect(one(`SELECT count(*) FROM vector_index_rows WHERE session_id = '${sessions[1].id}'`)).toBe(0);

      // The owner has doubled: the next search trains again (in this thread, after it returns).
      sessions.push(await session(store, 250));
      await store.searchVectors({ userId: "owner", model: MODEL, vector: probe, limit: 10 });
      await new Promise((resolve) => setImmediate(resolve));
      expect(one("SELECT generation FROM vector_index_owners")).toBe(2);
      const rebuilt = one("SELECT build FROM vector_index_owners");
      expect(rebuilt).toBeGreaterThan(half);
      expect(one("SELECT count(*) FROM vector_index_builds")).toBe(0);
      expect(one("SELECT size FROM vector_index_owners")).toBe(470);
      expect(one("SELECT count(*) FROM vector_index_rows")).toBe(470);
      expect(one(`SELECT count(*) FROM vector_index_rows WHERE build != ${rebuilt}`)).toBe(0);
      expect(one("SELECT count(*) FROM vector_index_ivf1_rowids")).toBe(470);
      for (const q of searches) {
        const indexed = await store.searchVectors({ userId: "owner", model: MODEL, vector: q, limit: 10 });
        expect(keys(indexed)).toEqual(
          keys(await exact.searchVectors({ userId: "owner", model: MODEL, vector: q, limit: 10 })),
        );
      }
    } finally {
      db.close();
      await exact.close();
      await store.close();
    }
  });

  it("leaves a build another connection is writing alone: the first publishes, the second is not registered", async () => {
    const path = freshPath();
    const store = createSqliteStore({
      path,
      backgroundCheckpoints: false,
      vectorIndex: { minOwnerVectors: 50, probes: 10_000, candidates: 10_000, background: false },
    });
    const exact = createSqliteStore({ path, backgroundCheckpoints: false, vectorIndex: false });
    for (let i = 0; i < 3; i++) await session(store, 100);
    // Two connections, as two processes' workers have.
    const first = new Database(path, { timeout: 5_000 });
    const second = new Database(path, { timeout: 5_000 });
    const one = (sql: string) => first.prepare(sql).pluck().get() as number;
    try {
      expect(loadVectorExtension(first) && loadVectorExtension(second)).toBe(true);
      const planA = planOwnerIndex(first, "owner", MODEL, 300)!;
      const planB = planOwnerIndex(second, "owner", MODEL, 300)!;
      let registered: number | undefined;
      let secondPublished: boolean | undefined;
      const firstPublished = writeOwnerIndex(first, planA, {
        pause: () => {
          if (secondPublished !== undefined) return;
          // The other build, planned meanwhile, comes to register between two of this one's transactions.
          registered = one("SELECT id FROM vector_index_builds");
          secondPublished = writeOwnerIndex(second, planB);
        },
      });
      expect(secondPublished).toBe(false);
      expect(firstPublished).toBe(true);
      expect(one("SELECT build FROM vector_index_owners")).toBe(registered);
      expect(one("SELECT count(*) FROM vector_index_builds")).toBe(0);
      expect(one("SELECT size FROM vector_index_owners")).toBe(300);
      expect(one("SELECT count(*) FROM vector_index_rows")).toBe(300);
      for (const q of [vector(), vector()]) {
        const indexed = await store.searchVectors({ userId: "owner", model: MODEL, vector: q, limit: 10 });
        expect(keys(indexed)).toEqual(
          keys(await exact.searchVectors({ userId: "owner", model: MODEL, vector: q, limit: 10 })),
        );
      }
    } finally {
      first.close();
      second.close();
      await exact.close();
      await store.close();
    }
  });
});
