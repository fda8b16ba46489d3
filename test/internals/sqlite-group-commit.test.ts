/**
 * The SQLite store's group commit: appends issued in the same turn of the event loop share one
 * transaction, each in a savepoint of its own. What a caller can see must not change: every append
 * is stored or refused on its own, calls see the appends issued before them, close keeps them.
 */
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { newSessionId } from "../../src/core/ids.js";
import { LocalLeases } from "../../src/stores/_lease.js";
import { openSqliteStoreDb } from "../../src/stores/sqlite/_db.js";
import { createSqliteStore } from "../../src/stores/sqlite/index.js";
import { expectCode } from "../../src/testing/index.js";
import { sqliteTempFiles } from "../stores/_sqlite-files.js";

const { freshPath } = sqliteTempFiles("threadkeep-sqlite-group-");
const say = (content: string) => [{ role: "user" as const, content }];

describe("sqlite group commit", () => {
  it("stores each of many concurrent appends, and refuses only the ones that must fail", async () => {
    const store = createSqliteStore({ path: freshPath() });
    try {
      const ids = await Promise.all(
        Array.from({ length: 6 }, async () => (await store.createSession({ id: newSessionId(), userId: "u" })).id),
      );
      const stale = await store.acquireLease(ids[5], {});
      await stale.release();
      const fresh = await store.acquireLease(ids[5], {});
      const results = await Promise.allSettled([
        ...ids.slice(0, 4).map((id, i) => store.appendMessages(id, say(`to ${i}`))),
        // Another owner's session, a missing one, and a write fenced by a lease taken over since.
        store.appendMessages(ids[4], say("not mine"), { owner: { userId: "someone-else" } }),
        store.appendMessages(newSessionId(), say("nobody's")),
        store.appendMessages(ids[5], say("stale"), { fence: stale.fence }),
        store.appendMessages(ids[5], say("current"), { fence: fresh.fence }),
      ]);
      await fresh.release();
      expect(results.map((r) => r.status)).toEqual([
        "fulfilled",
        "fulfilled",
        "fulfilled",
        "fulfilled",
        "rejected",
        "rejected",
        "rejected",
        "fulfilled",
      ]);
      const codes = results.flatMap((r) => (r.status === "rejected" ? [(r.reason as { code?: string }).code] : []));
      expect(codes).toEqual(["session_not_found", "session_not_found", "lease_expired"]);
      for (const [i, id] of ids.slice(0, 4).entries()) {
        expect((await store.getMessages(id)).map((m) => [m.seq, m.content])).toEqual([[1, `to ${i}`]]);
      }
      expect(await store.getMessages(ids[4])).toEqual([]);
      expect((await store.getMessages(ids[5])).map((m) => [m.seq, m.content])).toEqual([[1, "current"]]);
      expect(await store.getSession(ids[4])).not.toBeNull();
    } finally {
      await store.close();
    }
  });

  it("keeps program order: a call made right after an append sees it, and so does close", async () => {
    const path = freshPath();
    const store = createSqliteStore({ path });
    const id = (await store.createSession({ id: newSessionId(), userId: "u" })).id;
    const appended = store.appendMessages(id, say("first"));
    // Not awaited: the read is issued while the append still waits for its group.
    const read = store.getMessages(id);
    expect((await read).map((m) => m.content)).toEqual(["first"]);
    await appended;
    const last = store.appendMessages(id, say("second"));
    const other = store.appendMessages(id, say("third"));
    await store.close();
    expect((await Promise.all([last, other])).map(([m]) => m.seq)).toEqual([2, 3]);
    const raw = new Database(path, { readonly: true });
    expect(raw.prepare("SELECT seq FROM messages WHERE session_id = ? ORDER BY seq").pluck().all(id)).toEqual([
      1, 2, 3,
    ]);
    raw.close();
    await expectCode(store.appendMessages(id, say("after close")), "store_unavailable");
  });

  it("commits a lone append outside a turn at once, and groups the writes of turns", async () => {
    const path = freshPath();
    const store = createSqliteStore({ path });
    const [a, b] = [newSessionId(), newSessionId()];
    for (const id of [a, b]) await store.createSession({ id, userId: "u" });
    const reader = new Database(path, { readonly: true });
    try {
      const count = (id: string) =>
        reader.prepare("SELECT count(*) FROM messages WHERE session_id = ?").pluck().get(id);
      // Unfenced, nothing queued: committed before the call returns, no wait for the event loop.
      const alone = store.appendMessages(a, say("alone"), { owner: { userId: "u" } });
      expect(count(a)).toBe(1);
      expect((await alone).map((m) => m.seq)).toEqual([1]);
      // A turn's write waits for its group, and a write issued while a group forms joins it (program order).
      const lease = await store.acquireLease(b, {});
      const fenced = store.appendMessages(b, say("in a turn"), { fence: lease.fence });
      const joining = store.appendMessages(a, say("joins"));
      expect([count(a), count(b)]).toEqual([1, 0]);
      expect([(await fenced)[0].seq, (await joining)[0].seq]).toEqual([1, 2]);
      expect([count(a), count(b)]).toEqual([2, 1]);
      await lease.release();
      // Refusals still arrive as rejections, not throws.
      await expectCode(store.appendMessages(a, say("not mine"), { owner: { userId: "other" } }), "session_not_found");
    } finally {
      reader.close();
      await store.close();
    }
  });

  it("fails every append of a group whose transaction cannot start", async () => {
    const path = freshPath();
    const setup = createSqliteStore({ path });
    const ids = [newSessionId(), newSessionId()];
    for (const id of ids) await setup.createSession({ id, userId: "u" });
    await setup.close();
    const locker = new Database(path);
    locker.exec("BEGIN EXCLUSIVE");
    const busy = createSqliteStore({ path, busyTimeoutMs: 50 });
    try {
      const results = await Promise.allSettled(ids.map((id) => busy.appendMessages(id, say("x"))));
      expect(results.map((r) => (r.status === "rejected" ? (r.reason as { code?: string }).code : "stored"))).toEqual([
        "store_unavailable",
        "store_unavailable",
      ]);
    } finally {
      locker.exec("ROLLBACK");
      locker.close();
      await busy.close();
    }
  });

  it("fails a whole batch, earlier writes included, when one write ends the transaction", () => {
    const db = openSqliteStoreDb({ path: freshPath(), busyTimeoutMs: 1000, synchronous: "normal" }, new LocalLeases());
    try {
      const insert = db.db.prepare(
        "INSERT INTO sessions (id, user_id, created_at, last_activity_at) VALUES (?, 'u', 0, 0)",
      );
      const write = (id: string) => db.db.transaction(() => insert.run(id));
      // What SQLite does on an I/O error or running out of memory: the whole transaction is gone.
      const ending = db.db.transaction(() => {
        db.db.exec("ROLLBACK");
        throw new Error("the transaction ended");
      });
      expect(() => db.tx.batch([() => write("a")(), () => ending(), () => write("c")()])).toThrow(
        "the transaction ended",
      );
      expect(db.db.prepare("SELECT count(*) FROM sessions").pluck().get()).toBe(0);
      // A write that fails alone is undone alone.
      const failing = db.db.transaction(() => {
        insert.run("x");
        throw new Error("refused");
      });
      const outcomes = db.tx.batch([() => write("a")(), () => failing(), () => write("c")()]);
      expect(outcomes.map((o) => o.ok)).toEqual([true, false, true]);
      expect(db.db.prepare("SELECT id FROM sessions ORDER BY id").pluck().all()).toEqual(["a", "c"]);
    } finally {
      db.close();
    }
  });

  it("counts a batch of appends as one committed write (what the checkpointer paces itself by)", () => {
    let committed = 0;
    const db = openSqliteStoreDb(
      { path: freshPath(), busyTimeoutMs: 1000, synchronous: "normal" },
      new LocalLeases(),
      () => committed++,
    );
    try {
      const id = newSessionId();
      db.db.prepare("INSERT INTO sessions (id, user_id, created_at, last_activity_at) VALUES (?, 'u', 0, 0)").run(id);
      db.tx.append(id, ['{"role":"user","content":"alone"}'], {}, 1);
      expect(committed).toBe(1);
      const outcomes = db.tx.batch(
        [1, 2, 3].map((n) => () => db.tx.append(id, [`{"role":"user","content":"m${n}"}`], {}, 1)),
      );
      expect(outcomes.every((o) => o.ok)).toBe(true);
      expect(committed).toBe(2);
      expect(db.db.prepare("SELECT count(*) FROM messages WHERE session_id = ?").pluck().get(id)).toBe(4);
    } finally {
      db.close();
    }
  });
});
