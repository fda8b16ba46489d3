/**
 * The SQLite store's full-text index since schema v8: no queue, each session records how far it is
 * indexed (`fts_seq`) and whether messages wait (`fts_pending`); the indexer works in bounded steps.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, describe, expect, it } from "vitest";
import { newSessionId } from "../../src/core/ids.js";
import { LocalLeases } from "../../src/stores/_lease.js";
import { openSqliteStoreDb } from "../../src/stores/_sqlite-db.js";
import { openSqliteDatabase } from "../../src/stores/_sqlite-schema.js";
import { createSqliteStore } from "../../src/stores/sqlite.js";

const dir = mkdtempSync(join(tmpdir(), "threadkeep-sqlite-fulltext-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;
const freshPath = () => join(dir, `case-${++files}`, "threadkeep.db");
const say = (content: string) => ({ role: "user" as const, content });
const rowsIn = (db: Database.Database) => db.prepare("SELECT count(*) FROM messages_fts").pluck().get() as number;

describe("sqlite full-text index", () => {
  it("indexes at most the asked number of messages per step, across sessions, until none waits", () => {
    const db = openSqliteStoreDb({ path: freshPath(), busyTimeoutMs: 1000, synchronous: "normal" }, new LocalLeases());
    try {
      const ids = [newSessionId(), newSessionId(), newSessionId()];
      const insert = db.db.prepare("INSERT INTO sessions (id, user_id, created_at, last_activity_at) VALUES (?, 'u', 0, 0)");
      for (const id of ids) {
        insert.run(id);
        db.tx.append(id, Array.from({ length: 300 }, (_, i) => JSON.stringify(say(`word ${i}`))), {}, 1);
      }
      const steps: number[] = [];
      let more = true;
      while (more) {
        const before = rowsIn(db.db);
        more = db.tx.indexPending(250);
        steps.push(rowsIn(db.db) - before);
      }
      expect(steps.slice(0, 3)).toEqual([250, 250, 250]);
      expect(steps.every((n) => n <= 250)).toBe(true);
      expect(steps.reduce((a, b) => a + b, 0)).toBe(900);
      expect(db.db.prepare("SELECT count(*) FROM sessions WHERE fts_pending = 1").pluck().get()).toBe(0);
      // Nothing left: a step does nothing and says so.
      expect(db.tx.indexPending(250)).toBe(false);
    } finally {
      db.close();
    }
  });

  it("keeps search exact through replaceAfter, switchBranch, truncation and reused seqs, indexed or not", async () => {
    const path = freshPath();
    const store = createSqliteStore({ path, fullTextIndexDelayMs: 60_000 });
    try {
      const { id } = await store.createSession({ id: newSessionId(), userId: "u" });
      const find = async (text: string) =>
        (await store.search({ userId: "u", text, mode: "fulltext", limit: 50 })).map((h) => [h.seq, h.message.content]);
      await store.appendMessages(id, ["old one", "old two", "old three", "old four"].map(say));
      // Indexed (a search indexes first); then the tail replaced by a branch-keeping write.
      expect(await find("old")).toHaveLength(4);
      await store.replaceAfter(id, 2, [say("new three")], { branch: { reason: "regenerate" } });
      expect(await find("old")).toEqual([[2, "old two"], [1, "old one"]]);
      expect(await find("new")).toEqual([[3, "new three"]]);
      // Back to the branch: its messages return at their seqs and are found again.
      const [branch] = await store.listBranches(id);
      await store.switchBranch(id, branch.id);
      expect(await find("old")).toEqual([[4, "old four"], [3, "old three"], [2, "old two"], [1, "old one"]]);
      expect(await find("new")).toEqual([]);
      // Seqs reused before the index saw them: truncated, written again, never searched in between.
      await store.truncateAfter(id, 1);
      await store.appendMessages(id, [say("again two")]);
      await store.popMessage(id);
      await store.appendMessages(id, [say("third two")]);
      expect(await find("two")).toEqual([[2, "third two"]]);
      expect(await find("old")).toEqual([[1, "old one"]]);
      await store.appendMessages(id, [say("cap one"), say("cap two")], { maxMessages: 2 });
      expect(await find("two")).toEqual([[4, "cap two"]]);
      // Waiting already (seq 5), then everything truncated (the cap left 3 and 4, both indexed) and
      // seq 1 written again: below what the index had.
      await store.appendMessages(id, [say("five waits")]);
      await store.truncateAfter(id, 2);
      await store.appendMessages(id, [say("three anew")]);
      expect(await find("anew")).toEqual([[1, "three anew"]]);
      expect(await find("waits")).toEqual([]);
    } finally {
      await store.close();
    }
    const raw = new Database(path);
    expect(() => raw.exec("INSERT INTO messages_fts (messages_fts, rank) VALUES ('integrity-check', 1)")).not.toThrow();
    // Closing indexed everything: one row per message left.
    expect(rowsIn(raw)).toBe(raw.prepare("SELECT count(*) FROM messages").pluck().get());
    raw.close();
  });

  it("indexes what an older file left waiting in the background after opening, before any search", async () => {
    const path = freshPath();
    const old = openSqliteDatabase({ path, busyTimeoutMs: 100, synchronous: "normal", targetVersion: 7 });
    const id = newSessionId();
    old.prepare("INSERT INTO sessions (id, user_id, created_at, last_activity_at) VALUES (?, 'u', 1, 1)").run(id);
    for (let seq = 1; seq <= 1_200; seq++) {
      old.prepare("INSERT INTO messages (session_id, seq, created_at, body) VALUES (?, ?, 1, ?)").run(id, seq, JSON.stringify(say(`waiting ${seq}`)));
      old.prepare("INSERT INTO message_text (session_id, seq, search_text) VALUES (?, ?, ?)").run(id, seq, `waiting ${seq}`);
    }
    old.close();
    const store = createSqliteStore({ path, fullTextIndexDelayMs: 10 });
    try {
      expect(await store.countMessages(id)).toBe(1_200);
      const raw = new Database(path, { readonly: true });
      const indexed = () => raw.prepare("SELECT fts_seq FROM sessions").pluck().get() as number;
      const deadline = Date.now() + 10_000;
      while (indexed() < 1_200 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
      expect(indexed()).toBe(1_200);
      expect(rowsIn(raw)).toBe(1_200);
      raw.close();
    } finally {
      await store.close();
    }
  });

  it("gives a new session a key never used before, even after the newest session is deleted", async () => {
    const path = freshPath();
    const store = createSqliteStore({ path });
    try {
      const first = await store.createSession({ id: newSessionId(), userId: "u" });
      await store.appendMessages(first.id, [say("gone")]);
      await store.search({ userId: "u", text: "gone", mode: "fulltext" });
      await store.deleteSession(first.id);
      const second = await store.createSession({ id: newSessionId(), userId: "u" });
      await store.appendMessages(second.id, [say("kept")]);
      expect(await store.search({ userId: "u", text: "gone", mode: "fulltext" })).toEqual([]);
      expect((await store.search({ userId: "u", text: "kept", mode: "fulltext" })).map((h) => h.sessionId)).toEqual([second.id]);
      const raw = new Database(path, { readonly: true });
      expect(raw.prepare("SELECT key FROM sessions").pluck().all()).toEqual([2]);
      raw.close();
    } finally {
      await store.close();
    }
  });
});
