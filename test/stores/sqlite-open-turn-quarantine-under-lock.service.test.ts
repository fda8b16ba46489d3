/**
 * openTurn reads in one read transaction (697f280); the corrupt records it meets are moved to
 * quarantine after that transaction, each in a write of its own that waits out busy_timeout. A write
 * inside the read transaction would be an upgrade, which SQLite refuses at once (SQLITE_BUSY) while
 * another process holds the write lock: the turn failed then, and the corrupt records stayed.
 */
import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import Database from "better-sqlite3";
import { afterEach, describe, expect, it, vi } from "vitest";
import { newSessionId } from "../../src/core/ids.js";
import type { FullStore } from "../../src/core/types.js";
import { sqliteStoresPerTest, sqliteTempFiles } from "./_sqlite-files.js";

const { freshPath } = sqliteTempFiles("tk-sqlite-quarantine-lock-");
const { storeAt } = sqliteStoresPerTest();
const betterSqlite3 = createRequire(import.meta.url).resolve("better-sqlite3");

/** Another process takes the write lock (BEGIN IMMEDIATE), runs `sql` after `ms` and commits. */
async function holdWriteLock(path: string, ms: number, sql = ""): Promise<void> {
  const child = spawn(process.execPath, [
    "-e",
    `const D = require(${JSON.stringify(betterSqlite3)});
     const db = new D(${JSON.stringify(path)}); db.exec("BEGIN IMMEDIATE"); console.log("locked");
     setTimeout(() => { db.exec(${JSON.stringify(sql)}); db.exec("COMMIT"); db.close(); }, ${ms});`,
  ]);
  await new Promise<void>((resolve, reject) => {
    child.stdout.once("data", () => resolve());
    child.once("error", reject);
  });
}

/** A session with three messages, a summary and state, then its metadata, state, message 2 and summary corrupted. */
async function corruptSession(store: FullStore, path: string): Promise<string> {
  const id = newSessionId();
  await store.createSession({ id, userId: "u", metadata: { a: 1 } });
  await store.appendMessages(
    id,
    ["one", "two", "three"].map((content) => ({ role: "user" as const, content })),
  );
  await store.saveSummary!(id, { fromSeq: 1, toSeq: 2, content: "s", metadata: { m: 1 } });
  await store.setState(id, { ok: 1 }, 0);
  const raw = new Database(path);
  raw.prepare("UPDATE sessions SET metadata = 'nope', state = 'not json' WHERE id = ?").run(id);
  raw.prepare('UPDATE messages SET body = \'{"role": "user", "cont\' WHERE session_id = ? AND seq = 2').run(id);
  raw.prepare("UPDATE summaries SET metadata = '[oops' WHERE session_id = ?").run(id);
  raw.close();
  return id;
}

describe("sqlite openTurn on corrupt records", () => {
  // The console spies below would otherwise outlive the file in a worker that runs others after it.
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it("waits for another process's write lock, quarantines them, and returns the rest of the history", async () => {
    const path = freshPath();
    const store = storeAt(path);
    const id = await corruptSession(store, path);
    const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
    await holdWriteLock(path, 300);
    const turn = await store.openTurn!(id, { owner: { userId: "u" }, last: 20, lease: { ttlMs: 5_000 } });
    await turn.lease.release();
    expect(turn.status).toBe("ok");
    if (turn.status !== "ok") return;
    expect(turn.session?.metadata).toEqual({});
    expect(turn.state).toEqual({ version: 1, data: {} });
    expect(turn.messages.map((m) => m.content)).toEqual(["one", "three"]);
    expect(turn.summaries).toEqual([]);
    expect(warn).toHaveBeenCalledTimes(4);
    const raw = new Database(path, { readonly: true });
    expect(raw.prepare("SELECT record FROM quarantine ORDER BY record").pluck().all()).toEqual([
      "message",
      "metadata",
      "state",
      "summary",
    ]);
    expect(raw.prepare("SELECT metadata, state FROM sessions WHERE id = ?").get(id)).toEqual({
      metadata: "{}",
      state: "{}",
    });
    raw.close();
    // Moved aside once: the next turn finds nothing corrupt.
    const again = await store.openTurn!(id, { owner: { userId: "u" }, last: 20, lease: { ttlMs: 5_000 } });
    await again.lease.release();
    expect(warn).toHaveBeenCalledTimes(4);
  });

  it("leaves alone a record another process replaced between the read and the quarantine", async () => {
    const path = freshPath();
    const store = storeAt(path);
    const id = await corruptSession(store, path);
    vi.spyOn(console, "warn").mockImplementation(() => {});
    // The read's snapshot is taken while the lock is held; the state is replaced before the quarantine's write.
    await holdWriteLock(path, 300, `UPDATE sessions SET state = '{"fixed":1}', state_version = 2 WHERE id = '${id}'`);
    const turn = await store.openTurn!(id, { owner: { userId: "u" }, last: 20, lease: { ttlMs: 5_000 } });
    await turn.lease.release();
    expect(turn.status).toBe("ok");
    if (turn.status === "ok") expect(turn.state).toEqual({ version: 1, data: {} });
    expect(await store.getState(id)).toEqual({ version: 2, data: { fixed: 1 } });
    const raw = new Database(path, { readonly: true });
    expect(raw.prepare("SELECT record FROM quarantine ORDER BY record").pluck().all()).toEqual([
      "message",
      "metadata",
      "summary",
    ]);
    raw.close();
  });
});
