import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it, vi } from "vitest";
import { newSessionId } from "../../src/core/ids.js";
import { createSqliteStore } from "../../src/stores/sqlite/index.js";

/**
 * A message of about 24 KB: its overflow pages make an append write about eight pages of log, as a short
 * message did before the schema wrote two (v8), so the page counts below hold.
 */
const padded = (content: string) => `${content} ${"x".repeat(24_000)}`;

// A host where worker threads cannot start.
vi.mock("node:worker_threads", () => ({
  Worker: class {
    constructor() {
      throw new Error("worker threads are not available here");
    }
  },
}));

const dir = mkdtempSync(join(tmpdir(), "threadkeep-sqlite-checkpoint-fallback-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("sqlite store without a checkpoint worker", () => {
  it("keeps every write, warns once, and checkpoints in commits again past 1,000 pages", async () => {
    const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
    const path = join(dir, "threadkeep.db");
    const store = createSqliteStore({ path });
    const session = await store.createSession({ id: newSessionId(), userId: "u" });
    const append = (content: string) => store.appendMessages(session.id, [{ role: "user", content: padded(content) }]);
    // The 200th write tries to start the worker; that write and all after it still succeed.
    for (let i = 0; i < 250; i++) await append(`message ${i}`);
    expect(warn).toHaveBeenCalledOnce();
    expect(String(warn.mock.calls[0][0])).toContain("worker threads are not available here");
    // Back to SQLite's default, a commit checkpoints past 1,000 pages and the log starts over: 500 more
    // appends (about 4,000 pages) do not make the WAL file (as long as the longest log) any longer.
    const longest = statSync(`${path}-wal`).size;
    for (let i = 0; i < 500; i++) await append(`more ${i}`);
    expect(statSync(`${path}-wal`).size).toBeLessThanOrEqual(longest);
    expect(await store.countMessages(session.id)).toBe(750);
    await store.close();
    warn.mockRestore();
  });
});
