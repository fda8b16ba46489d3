/**
 * The vector index worker and other users' writes (issue 34): the worker writes a build in short
 * transactions under a build id no search reads, and publishes it in one small transaction
 * (sqlite/_vector-index.ts), so another user's append, which waits for the file's write lock on the
 * event loop (SQLite's busy handler), never waits for the whole build. Written in one transaction
 * (before), the 24,000 vectors of 32 dimensions below held the loop 536 ms (load 8) and 2,337 ms
 * (load 12), of which the worker's work 504 ms; in short transactions (after), 22-86 ms, of which
 * the worker's work 11-14 ms (load 8-16). A build interrupted by a close is never published, and the next
 * build removes what it wrote (test/internals/sqlite-vector-index-builds.test.ts: a crash).
 */
import { readlinkSync } from "node:fs";
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { newSessionId } from "../../src/core/ids.js";
import { createSqliteStore } from "../../src/stores/sqlite/index.js";
import { seededRandom } from "../../bench/_harness.js";
import { threadTimes } from "../_thread-cpu.js";
import { until } from "../_wait.js";
import { sqliteTempFiles } from "./_sqlite-files.js";

const { freshPath } = sqliteTempFiles("threadkeep-sqlite-vector-lock-");
const MODEL = "m";
const DIMS = 32;
const MESSAGES = 24_000;
const PER_SESSION = 1_000;
/**
 * The most of the build's work (CPU of the worker) the other user's append may wait for. A
 * transaction of the build writes for about a millisecond; the bound leaves room for a few of them,
 * and for a stall of this thread's own (the collector) while the worker plans, and is well under the
 * single transaction's 300 ms and more of CPU at this size (182 ms at 12,000 at load 13).
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
/**
 * Watches the event loop with a timer every 5 ms. Each gap between two ticks is measured twice: as
 * test/_event-loop-gaps.ts does (this thread's own wait for a core taken off), and as the CPU another
 * thread of the process used during it, when less: how much of the build's work this thread waited
 * for. The first is what the other user saw, and on a loaded machine it also counts the worker
 * sitting in the run queue inside one of its transactions (up to 170 ms of one ~1 ms transaction,
 * measured here with a core kept busy at load 12), which no way of writing the build avoids; the
 * second does not, and tells one transaction of a millisecond from a whole build's, at any load.
 */
function watchLoopAndWorker(): { stop(): { held: number; work: number } } {
  const self = readlinkSync("/proc/thread-self").split("/").pop()!;
  let last = performance.now();
  let times = threadTimes();
  let held = 0;
  let work = 0;
  const tick = () => {
    const now = performance.now();
    const next = threadTimes();
    let own = 0;
    let other = 0;
    for (const [tid, [cpu, wait]] of next) {
      const [cpuBefore, waitBefore] = times.get(tid) ?? [cpu, wait];
      if (tid === self) own = wait - waitBefore;
      else other = Math.max(other, cpu - cpuBefore);
    }
    const gap = now - last - own;
    held = Math.max(held, gap);
    work = Math.max(work, Math.min(gap, other));
    last = now;
    times = next;
  };
  const timer = setInterval(tick, 5);
  return {
    stop: () => {
      clearInterval(timer);
      tick();
      return { held, work };
    },
  };
}

/** Seeded random vectors of {@link DIMS} dimensions. */
const vectors = (seed: number) => {
  const random = seededRandom(seed);
  return () => Array.from({ length: DIMS }, () => random() - 0.5);
};

/** `count` embedded messages of the owner "big", {@link PER_SESSION} a session; `vector(s, i)` is the i-th of session s's. */
async function embedBigOwner(
  store: ReturnType<typeof createSqliteStore>,
  count: number,
  vector: (session: number, i: number) => number[],
): Promise<void> {
  for (let s = 0; s < count / PER_SESSION; s++) {
    const id = newSessionId();
    await store.createSession({ id, userId: "big" });
    const added = await store.appendMessages(
      id,
      Array.from({ length: PER_SESSION }, (_, i) => ({ role: "user" as const, content: `${s}.${i}` })),
    );
    await store.putEmbeddings(
      id,
      MODEL,
      added.map((m, i) => ({ seq: m.seq, createdAt: m.createdAt, vector: vector(s, i) })),
    );
  }
}

const hasIndex = (path: string) =>
  read(path, "SELECT 1 FROM sqlite_master WHERE name = 'vector_index_owners'") !== undefined;

describe("sqlite vector index build and other users' writes", () => {
  it("another user's appends never wait for the whole build: it is written in short transactions", async () => {
    const path = freshPath();
    const store = createSqliteStore({ path });
    const vector = vectors(3434);
    try {
      await embedBigOwner(store, MESSAGES, vector);
      const other = newSessionId();
      await store.createSession({ id: other, userId: "other" });
      // The large owner's first search scans exactly and starts the build in the worker.
      expect(await store.searchVectors({ userId: "big", model: MODEL, vector: vector(), limit: 10 })).toHaveLength(10);

      // Another user appends every 20 ms, each a task of its own, until the index is written. The loop
      // is watched rather than the appends' times: a held loop is the append waiting for the lock,
      // while the threads' waits for a core (a loaded machine) are taken off.
      const loop = watchLoopAndWorker();
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
        { timeoutMs: 100_000, everyMs: 50 },
      );
      stop = true;
      await appender;
      const { held, work } = loop.stop();
      console.log(
        `[lock] while the worker built: longest loop hold ${Math.round(held)} ms, of which the worker's work ${Math.round(work)} ms; slowest append ${Math.round(slowest)} ms of ${appended}`,
      );
      expect((await store.getMessages(other)).length).toBe(appended);
      expect(work).toBeLessThanOrEqual(BOUND_MS);
    } finally {
      await store.close();
    }
  }, 120_000);

  it("a store closed while the worker writes publishes nothing; the next store's build completes and removes what it wrote", async () => {
    const path = freshPath();
    const vector = vectors(3435);
    const size = 12_000;
    const store = createSqliteStore({ path });
    const probe = vector();
    let closed = false;
    try {
      await embedBigOwner(store, size, (s, i) => (s === 3 && i === 5 ? probe : vector()));
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
  }, 120_000);
});
