/**
 * Schema v9: an append leaves the session row alone (its new messages carry the activity) unless the
 * hour changes; a session's first append after an indexing run also writes its row of the indexer's
 * queue. Every read of the activity (getSession, listing, expiry, owner-scoped calls, searches) still
 * sees the exact time, and a touch, a pop or a truncation sets or keeps it as before.
 */
import { statSync } from "node:fs";
import Database from "better-sqlite3";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { newSessionId } from "../../src/core/ids.js";
import { openSqliteDatabase } from "../../src/stores/sqlite/_schema.js";
import { sqliteStoresPerTest, sqliteTempFiles } from "../stores/_sqlite-files.js";

const { freshPath } = sqliteTempFiles("threadkeep-sqlite-activity-");
const HOUR = 3_600_000;
// Mid-hour, so no append of a test crosses into the next hour (which writes the row on purpose).
const T0 = 490_000 * HOUR + 10 * 60_000;
const text = (content: string) => ({ role: "user" as const, content });

/** The row's own activity, as stored (not the exact one the store reads). */
function rowActivity(path: string, id: string): number {
  const db = new Database(path, { readonly: true });
  try {
    return db.prepare("SELECT last_activity_at FROM sessions WHERE id = ?").pluck().get(id) as number;
  } finally {
    db.close();
  }
}

/** Frames in the write-ahead log: it only grows while nothing checkpoints (fewer than 1,000 pages). */
const walFrames = (path: string) => Math.max(0, (statSync(`${path}-wal`).size - 32) / (24 + 4096));

describe("sqlite: the last activity carried by the newest messages (schema v9)", () => {
  const { storeAt } = sqliteStoresPerTest();
  const at = (ms: number) => vi.setSystemTime(T0 + ms);
  /** A new session of "u" in a store of its own, with one append at each of `times` (ms after T0). */
  const sessionWithAppends = async (...times: number[]) => {
    const store = storeAt(freshPath(), { fullTextIndexDelayMs: 60_000 });
    const { id } = await store.createSession({ id: newSessionId(), userId: "u" });
    for (const [i, ms] of times.entries()) {
      at(ms);
      await store.appendMessages(id, [text(`message ${i + 1}`)]);
    }
    return { store, id };
  };
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ["Date"] });
    at(0);
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it("an append writes its message's page of log and not the session row; the first after indexing adds the queue's", async () => {
    const path = freshPath();
    const store = storeAt(path, { backgroundCheckpoints: false, fullTextIndexDelayMs: 60_000 });
    const { id } = await store.createSession({ id: newSessionId(), userId: "u" });
    at(1_000);
    let before = walFrames(path);
    await store.appendMessages(id, [text("joins the indexer's queue")]);
    expect(walFrames(path) - before).toBe(2);
    for (let i = 2; i <= 5; i++) {
      at(i * 1_000);
      before = walFrames(path);
      await store.appendMessages(id, [text(`append ${i}`)]);
      expect(walFrames(path) - before).toBe(1);
      expect((await store.getSession(id))!.lastActivityAt).toBe(T0 + i * 1_000);
    }
    expect(rowActivity(path, id)).toBe(T0);
  });

  it("lists, expires, scopes reads and searches by the exact activity, not the row's", async () => {
    const path = freshPath();
    const store = storeAt(path, { backgroundCheckpoints: false, fullTextIndexDelayMs: 60_000 });
    const [a, b] = [newSessionId(), newSessionId()];
    await store.createSession({ id: a, userId: "u" });
    await store.createSession({ id: b, userId: "u" });
    at(1_000);
    await store.appendMessages(a, [text("first of a")]);
    at(2_000);
    await store.appendMessages(b, [text("first of b")]);
    at(3_000);
    await store.appendMessages(a, [text("zebra in a")]);
    expect(rowActivity(path, a)).toBe(T0);

    expect((await store.listSessions("u")).sessions.map((s) => [s.id, s.lastActivityAt])).toEqual([
      [a, T0 + 3_000],
      [b, T0 + 2_000],
    ]);
    const page = await store.listSessions("u", { limit: 1 });
    expect((await store.listSessions("u", { limit: 1, cursor: page.nextCursor })).sessions.map((s) => s.id)).toEqual([
      b,
    ]);
    const since = { userId: "u", activeSince: T0 + 2_500 };
    expect((await store.getMessages(a, { last: 20, owner: since })).map((m) => m.content)).toEqual([
      "first of a",
      "zebra in a",
    ]);
    await expect(store.getMessages(b, { last: 20, owner: since })).rejects.toMatchObject({ code: "session_not_found" });
    at(4_000);
    expect(await store.appendMessages(a, [text("scoped append")], { owner: since })).toHaveLength(1);
    await expect(store.appendMessages(b, [text("expired for this caller")], { owner: since })).rejects.toMatchObject({
      code: "session_not_found",
    });
    for (const mode of ["substring", "fulltext"] as const) {
      const hits = await store.search({ userId: "u", text: "zebra", mode, activeSince: T0 + 2_500 });
      expect(
        hits.map((h) => h.sessionId),
        mode,
      ).toEqual([a]);
    }
    expect(await store.expire(T0 + 2_500)).toEqual([b]);
    expect((await store.listSessions("u")).sessions.map((s) => s.id)).toEqual([a]);
  });

  it("a touch to a past time holds over the messages before it; later appends move the activity again", async () => {
    const { store, id } = await sessionWithAppends(1_000, 2_000);
    await store.touchSession(id, 5);
    expect((await store.getSession(id))!.lastActivityAt).toBe(5);
    expect(await store.expire(T0)).toEqual([id]);

    const { id: again } = await store.createSession({ id: newSessionId(), userId: "u" });
    at(3_000);
    await store.appendMessages(again, [text("a")]);
    await store.touchSession(again, 5);
    at(4_000);
    await store.appendMessages(again, [text("b")]);
    expect((await store.getSession(again))!.lastActivityAt).toBe(T0 + 4_000);
  });

  it("a pop or a truncation keeps the activity of the messages it removes", async () => {
    const { store, id } = await sessionWithAppends(1_000, 2_000, 3_000, 3_000);
    at(9_000);
    expect((await store.popMessage(id))?.content).toBe("message 4");
    expect((await store.getSession(id))!.lastActivityAt).toBe(T0 + 3_000);
    expect(await store.truncateAfter(id, 1)).toBe(2);
    expect((await store.getSession(id))!.lastActivityAt).toBe(T0 + 3_000);
    at(10_000);
    const [added] = await store.appendMessages(id, [text("e")]);
    expect(added.seq).toBe(2);
    expect((await store.getSession(id))!.lastActivityAt).toBe(T0 + 10_000);
  });

  it("an append of no messages (a cap's) moves the activity and queues nothing for the indexer", async () => {
    const path = freshPath();
    const store = storeAt(path, { fullTextIndexDelayMs: 60_000 });
    const { id } = await store.createSession({ id: newSessionId(), userId: "u" });
    at(1_000);
    expect(await store.appendMessages(id, [], { maxMessages: 1 })).toEqual([]);
    expect((await store.getSession(id))!.lastActivityAt).toBe(T0 + 1_000);
    const db = new Database(path, { readonly: true });
    expect(db.prepare("SELECT count(*) FROM fts_queue").pluck().get()).toBe(0);
    db.close();
  });

  it("a truncation after a fractional seq removes what follows it, keeping the activity", async () => {
    const { store, id } = await sessionWithAppends(1_000, 2_000, 3_000);
    at(9_000);
    expect(await store.truncateAfter(id, 1.5)).toBe(2);
    expect((await store.getMessages(id)).map((m) => m.seq)).toEqual([1]);
    expect((await store.getSession(id))!.lastActivityAt).toBe(T0 + 3_000);
  });

  it("migrates a version 8 file: a session touched to a past time keeps that time, and what waited for the index is found", async () => {
    const path = freshPath();
    const old = openSqliteDatabase({ path, busyTimeoutMs: 100, synchronous: "normal", targetVersion: 8 });
    const [touched, plain] = [newSessionId(), newSessionId()];
    const body = JSON.stringify(text("from version 8"));
    old.prepare("INSERT INTO sessions (id, user_id, created_at, last_activity_at) VALUES (?, 'u', 1, 50)").run(touched);
    old.prepare("INSERT INTO sessions (id, user_id, created_at, last_activity_at) VALUES (?, 'u', 1, 7000)").run(plain);
    for (const id of [touched, plain])
      old.prepare("INSERT INTO messages (session_id, seq, created_at, body) VALUES (?, 1, 7000, ?)").run(id, body);
    // Version 8 marked a session whose messages waited for the full-text index in its row.
    old.prepare("UPDATE sessions SET fts_pending = 1 WHERE id = ?").run(plain);
    old.close();

    const store = storeAt(path, { fullTextIndexDelayMs: 60_000 });
    expect((await store.getSession(touched))!.lastActivityAt).toBe(50);
    expect((await store.getSession(plain))!.lastActivityAt).toBe(7000);
    expect((await store.search({ userId: "u", text: "version", mode: "fulltext" })).map((h) => h.sessionId)).toEqual([
      plain,
    ]);
    expect(await store.expire(100)).toEqual([touched]);
    at(1_000);
    await store.appendMessages(plain, [text("after the upgrade")]);
    at(2_000);
    await store.appendMessages(plain, [text("and again")]);
    expect((await store.getSession(plain))!.lastActivityAt).toBe(T0 + 2_000);
  });
});
