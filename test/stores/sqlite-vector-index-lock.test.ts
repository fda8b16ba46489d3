/**
 * The vector index worker and other users' writes (issue 34): the worker writes a build in short
 * transactions under a build id no search reads, and publishes it in one small transaction
 * (sqlite/_vector-index.ts), so another user's append, which waits for the file's write lock on the
 * event loop (SQLite's busy handler), never waits for the whole build. Written in one transaction,
 * 24,000 vectors of 32 dimensions held the lock for 0.4-0.9 s of the worker's CPU (measured at load
 * 15; ~200 ms at 12,000): this test held the loop 536 ms against it (load 8), and 22-58 ms with the
 * short transactions (load 8-16). A build interrupted by a close is never published, and the next
 * build removes what it wrote (test/internals/sqlite-vector-index-builds.test.ts: a crash).
 */
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { newSessionId } from "../../src/core/ids.js";
import { createSqliteStore } from "../../src/stores/sqlite/index.js";
import { seededRandom } from "../../bench/_harness.js";
import { watchEventLoop } from "../_event-loop-gaps.js";
import { until } from "../_wait.js";
import { sqliteTempFiles } from "./_sqlite-files.js";

const { freshPath } = sqliteTempFiles("threadkeep-sqlite-vector-lock-");
const MODEL = "m";
const DIMS = 32;
const MESSAGES = 24_000;
const PER_SESSION = 1_000;
/**
 * The longest the other user's append may hold the loop. The build's transactions write for about a
 * millisecond each, with three to four times as long free after them, so an append waits one of them
 * plus a step of the busy handler (1-10 ms); the bound leaves room for the worker losing its core
 * inside one on a loaded machine (tens of milliseconds at load 15-20), and stays well under the
 * single transaction's 400 ms and more.
 */
const BOUND_MS = 100;

const read = <T>(path: string, sql: string): T | undefined => {
  const db = new Database(path, { readonly: true });
  try {
    return db.prepare(sql).pluck().get() as T | undefined;
  } finally {
    db.close();
  }
};
const hasIndex = (path: string) =>
  read(path, "SELECT 1 FROM sqlite_master WHERE name = 'vector_index_owners'") !== undefined;

describe("sqlite vector index build and other users' writes", () => {
  it("another user's appends never wait for the whole build: it is written in short transactions", async () => {
    const path = freshPath();
    const store = createSqliteStore({ path });
    const random = seededRandom(3434);
    const vector = () => Array.from({ length: DIMS }, () => random() - 0.5);
    try {
      for (let s = 0; s < MESSAGES / PER_SESSION; s++) {
        const id = newSessionId();
        await store.createSession({ id, userId: "big" });
        const added = await store.appendMessages(
          id,
          Array.from({ length: PER_SESSION }, (_, i) => ({ role: "user" as const, content: `${s}.${i}` })),
        );
        await store.putEmbeddings(
          id,
          MODEL,
          added.map((m) => ({ seq: m.seq, createdAt: m.createdAt, vector: vector() })),
        );
      }
      const other = newSessionId();
      await store.createSession({ id: other, userId: "other" });
      // The large owner's first search scans exactly and starts the build in the worker.
      expect(await store.searchVectors({ userId: "big", model: MODEL, vector: vector(), limit: 10 })).toHaveLength(10);

      // Another user appends every 20 ms, each a task of its own, until the index is written. The loop
      // is watched rather than the appends' times: a held loop is the append waiting for the lock,
      // while the thread's own wait for a core (a loaded machine) is taken off.
      const loop = watchEventLoop(5);
      let appended = 0;
      let slowest = 0;
      let stop = false;
      const appender = (async () => {
        while (!stop) {
          const started = performance.now();
          await store.appendMessages(other, [{ role: "user", content: `meanwhile ${appended}` }]);
          slowest = Math.max(slowest, performance.now() - started);
          appended++;
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
      })();
      await until(
        "the owner's index is written",
        () =>
          hasIndex(path) &&
          read<number>(path, "SELECT size FROM vector_index_owners WHERE user_id = 'big'") === MESSAGES,
        { timeoutMs: 60_000, everyMs: 50 },
      );
      stop = true;
      await appender;
      const longest = loop.stop();
      console.log(
        `[lock] longest loop hold while the worker built ${Math.round(longest)} ms; slowest append ${Math.round(slowest)} ms of ${appended}`,
      );
      expect((await store.getMessages(other)).length).toBe(appended);
      expect(longest).toBeLessThanOrEqual(BOUND_MS);
    } finally {
      await store.close();
    }
  }, 60_000);

  it("a store closed while the worker writes publishes nothing; the next store's build completes and removes what it wrote", async () => {
    const path = freshPath();
    const random = seededRandom(3435);
    const vector = () => Array.from({ length: DIMS }, () => random() - 0.5);
    const size = 12_000;
    const store = createSqliteStore({ path });
    const probe = vector();
    let closed = false;
    try {
      for (let s = 0; s < size / PER_SESSION; s++) {
        const id = newSessionId();
        await store.createSession({ id, userId: "big" });
        const added = await store.appendMessages(
          id,
          Array.from({ length: PER_SESSION }, (_, i) => ({ role: "user" as const, content: `${s}.${i}` })),
        );
        await store.putEmbeddings(
          id,
          MODEL,
          added.map((m, i) => ({ seq: m.seq, createdAt: m.createdAt, vector: s === 3 && i === 5 ? probe : vector() })),
        );
      }
      await store.searchVectors({ userId: "big", model: MODEL, vector: probe, limit: 10 });
      // The worker has registered its build and written some of it (its writing lasts a few hundred
      // milliseconds at the least: a slice of 1 ms, then a pause of 3 or more).
      await until(
        "the worker writes its build",
        () =>
          hasIndex(path) &&
          (read<number>(
            path,
            "SELECT count(*) FROM vector_index_rows r JOIN vector_index_builds b ON b.id = r.build",
          ) ?? 0) > 0,
        { timeoutMs: 30_000, everyMs: 5 },
      );
      await store.close();
      closed = true;
      expect(read(path, "SELECT count(*) FROM vector_index_owners")).toBe(0);
      const left = read<number>(path, "SELECT count(*) FROM vector_index_rows")!;
      expect(left).toBeGreaterThan(0);
      expect(left).toBeLessThan(size);
    } finally {
      if (!closed) await store.close();
    }

    const again = createSqliteStore({ path });
    try {
      // Exact (nothing published): the probe's own message first.
      const [hit] = await again.searchVectors({ userId: "big", model: MODEL, vector: probe, limit: 1 });
      expect(hit.score).toBeCloseTo(1, 5);
      expect(hit.message.seq).toBe(6);
      await until(
        "the next build is published and the stopped one removed",
        () =>
          read(path, "SELECT size FROM vector_index_owners") === size &&
          read(path, "SELECT count(*) FROM vector_index_rows") === size &&
          read(path, "SELECT count(*) FROM vector_index_builds") === 0,
        { timeoutMs: 60_000, everyMs: 50 },
      );
      const build = read<number>(path, "SELECT build FROM vector_index_owners");
      expect(read(path, `SELECT count(*) FROM vector_index_rows WHERE build != ${build}`)).toBe(0);
    } finally {
      await again.close();
    }
  }, 90_000);
});
