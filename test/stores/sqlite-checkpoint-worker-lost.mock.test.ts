/**
 * The SQLite checkpoint worker dying after it started: killed from outside (terminated, exit code 1)
 * after it has checkpointed, or crashing on an uncaught error. The store warns once, commits
 * checkpoint past 1,000 pages again (the log does not grow towards the 10,000-page backstop), and every
 * write and read keeps working. The workers are real; the test only keeps a handle on them, and for
 * the crash puts a throw in front of the worker's own code.
 */
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it, vi } from "vitest";
import { newSessionId } from "../../src/core/ids.js";
import { createSqliteStore } from "../../src/stores/sqlite/index.js";

/**
 * A message of about 24 KB: its overflow pages make an append write about eight pages of log, as a short
 * message did before the schema wrote two (v8), so the page counts below hold.
 */
const padded = (content: string) => `${content} ${"x".repeat(24_000)}`;

const workers = vi.hoisted(() => ({
  started: [] as import("node:worker_threads").Worker[],
  /** Per worker, settled when it exits: a crashing worker may exit before a test gets to listen. */
  exited: new Map<object, Promise<unknown>>(),
  crash: false,
}));
vi.mock("node:worker_threads", async (importOriginal) => {
  const actual = await importOriginal<typeof import("node:worker_threads")>();
  class Tracked extends actual.Worker {
    constructor(source: string, options: import("node:worker_threads").WorkerOptions) {
      super(workers.crash ? `throw new Error("the checkpoint worker crashed");\n${source}` : source, options);
      workers.started.push(this);
      workers.exited.set(this, new Promise((resolve) => this.once("exit", resolve)));
    }
  }
  return { ...actual, Worker: Tracked };
});

const dir = mkdtempSync(join(tmpdir(), "threadkeep-sqlite-worker-lost-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
afterEach(() => {
  workers.started.length = 0;
  workers.exited.clear();
  workers.crash = false;
  vi.restoreAllMocks();
});
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function until(condition: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

describe("sqlite store whose checkpoint worker dies after it started", () => {
  it("warns once when the worker is killed, checkpoints in commits again and keeps every write", async () => {
    const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
    const path = join(dir, "killed.db");
    const store = createSqliteStore({ path });
    try {
      const session = await store.createSession({ id: newSessionId(), userId: "u" });
      const append = (content: string) =>
        store.appendMessages(session.id, [{ role: "user", content: padded(content) }]);
      // Until a checkpoint copies the log into it, the database file keeps the size it was created with.
      const created = statSync(path).size;
      for (let i = 0; i < 250; i++) await append(`message ${i}`);
      expect(workers.started).toHaveLength(1);
      // Kill it once it has checkpointed (the database file grew; a thread killed before it runs would
      // exit with 0, not 1). A fixed pause before the kill was too short on a loaded machine, where the
      // thread takes longer to start and open the file.
      const worker = workers.started[0];
      await until(() => statSync(path).size > created, "the worker's first checkpoint");
      const exited = new Promise<number>((resolve) => worker.once("exit", resolve));
      await worker.terminate();
      expect(await exited).toBe(1);
      await until(() => warn.mock.calls.length > 0, "the warning");
      expect(warn).toHaveBeenCalledOnce();
      expect(String(warn.mock.calls[0][0])).toMatch(/checkpoint worker stopped .*exited with code 1/);

      // ~9 pages an append: 800 appends log about 7,000 pages, far past what the log held so far
      // (at most the ~2,300 pages of the 250 writes). Checkpointing again at 1,000 pages, the log starts
      // over instead, so the file (as long as the longest log) stays. The kill may have cut a pass short:
      // then the next commit adds to the log before it checkpoints all of it, and the one after starts
      // it over, so the longest log is measured after that first commit.
      await append("after the kill");
      const longest = statSync(`${path}-wal`).size;
      for (let i = 0; i < 800; i++) await append(`after ${i}`);
      expect(statSync(`${path}-wal`).size).toBeLessThanOrEqual(longest);
      expect(await store.countMessages(session.id)).toBe(1_051);
      expect((await store.getMessages(session.id, { last: 1 }))[0].content).toBe(padded("after 799"));
      expect(workers.started).toHaveLength(1);
      expect(warn).toHaveBeenCalledOnce();
    } finally {
      await store.close();
    }
    // Closed cleanly: the reopened file has everything.
    const reopened = createSqliteStore({ path, backgroundCheckpoints: false });
    const [listed] = (await reopened.listSessions("u")).sessions;
    expect(await reopened.countMessages(listed.id)).toBe(1_051);
    await reopened.close();
  }, 60_000);

  it("warns once when the worker crashes on an uncaught error, and keeps every write", async () => {
    const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
    workers.crash = true;
    const path = join(dir, "crashed.db");
    const store = createSqliteStore({ path });
    try {
      const session = await store.createSession({ id: newSessionId(), userId: "u" });
      for (let i = 0; i < 250; i++)
        await store.appendMessages(session.id, [{ role: "user", content: padded(`m${i}`) }]);
      expect(workers.started).toHaveLength(1);
      await workers.exited.get(workers.started[0]);
      // The error and the exit that follows it are one loss, reported once.
      await sleep(50);
      expect(warn).toHaveBeenCalledOnce();
      expect(String(warn.mock.calls[0][0])).toContain("the checkpoint worker crashed");
      // Never checkpointed, the log is past 1,000 pages already: the next commit checkpoints it (a few
      // pages longer first), and the one after starts it over.
      for (let i = 0; i < 5; i++) await store.appendMessages(session.id, [{ role: "user", content: padded(`k${i}`) }]);
      const longest = statSync(`${path}-wal`).size;
      for (let i = 0; i < 800; i++)
        await store.appendMessages(session.id, [{ role: "user", content: padded(`n${i}`) }]);
      expect(statSync(`${path}-wal`).size).toBeLessThanOrEqual(longest);
      expect(await store.countMessages(session.id)).toBe(1_055);
    } finally {
      await store.close();
    }
  }, 60_000);
});
