import { statSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { Worker } from "node:worker_threads";
import Database from "better-sqlite3";
import { afterEach, describe, expect, it, vi } from "vitest";
import { newSessionId } from "../../src/core/ids.js";
import { openSqliteDatabase, SQLITE_SCHEMA_VERSION } from "../../src/stores/sqlite/_schema.js";
import { INACTIVE_SESSIONS_SQL, LIST_AFTER_SQL } from "../../src/stores/sqlite/_activity.js";
import { PENDING_OF_OWNER_SQL } from "../../src/stores/sqlite/_search-statements.js";
import { newestMessagesSql, RANGE_NEWEST_FIRST_SQL } from "../../src/stores/sqlite/_statements.js";
import { createSqliteStore } from "../../src/stores/sqlite/index.js";
import { expectTwoProcessTurnOrder } from "../stores/_two-process-turns.js";
import { sqliteV7File } from "./_sqlite-v7-file.js";
import { expectCode, runStoreConformance } from "../../src/testing/index.js";
import { sqliteStoresPerTest, sqliteTempFiles } from "../stores/_sqlite-files.js";

const { dir, freshPath } = sqliteTempFiles("threadkeep-sqlite-");

// One file for the whole suite, so its persistence test reopens the same database.
const suitePath = join(dir, "conformance", "threadkeep.db");
runStoreConformance("sqlite", () => createSqliteStore({ path: suitePath }));
// The same contract with turn leases kept in the file (several processes on one database).
const sharedPath = join(dir, "conformance-shared", "threadkeep.db");
runStoreConformance("sqlite (lease in the file)", () =>
  createSqliteStore({ path: sharedPath, crossProcessLease: true }),
);

describe("sqlite store with the lease in the file", () => {
  it("serialises 2 processes × 100 concurrent turns: contiguous seq, each turn adjacent, none lost or duplicated", async () => {
    const path = freshPath();
    const store = createSqliteStore({ path, crossProcessLease: true });
    try {
      const session = await store.createSession({ id: newSessionId(), userId: "hammer" });
      const recipe = {
        module: "src/stores/sqlite/index.ts",
        factory: "createSqliteStore",
        options: { path, crossProcessLease: true },
      };
      await expectTwoProcessTurnOrder(store, recipe, session.id);
    } finally {
      await store.close();
    }
  }, 60_000);

  it("gives the lease back in the commit's transaction: the holder's release writes nothing more", async () => {
    const path = freshPath();
    const store = createSqliteStore({ path, crossProcessLease: true });
    try {
      const id = newSessionId();
      await store.createSession({ id, userId: "fold" });
      const raw = new Database(path);
      raw.exec(`CREATE TABLE lease_releases (fence INTEGER);
        CREATE TRIGGER count_releases AFTER UPDATE OF expires_at ON turn_leases WHEN new.expires_at = 0
        BEGIN INSERT INTO lease_releases VALUES (new.fence); END;`);
      const releases = () => raw.prepare("SELECT count(*) FROM lease_releases").pluck().get();
      const turn = await store.openTurn!(id, { owner: { userId: "fold" }, lease: { ttlMs: 10_000 }, last: 20 });
      expect(turn.status).toBe("ok");
      await store.appendMessages(id, [{ role: "user", content: "q" }], { fence: turn.lease.fence, releaseLease: true });
      expect(releases()).toBe(1);
      await turn.lease.release();
      expect(releases()).toBe(1);
      // A write that fails keeps the lease: nothing released, and the holder's release still frees it.
      const next = await store.openTurn!(id, { owner: { userId: "fold" }, lease: { ttlMs: 10_000 }, last: 20 });
      await expectCode(
        store.appendMessages(id, [{ role: "user", content: "x" }], {
          fence: next.lease.fence,
          releaseLease: true,
          owner: { userId: "other" },
        }),
        "session_not_found",
      );
      expect(releases()).toBe(1);
      await next.lease.release();
      expect(releases()).toBe(2);
      // A replayed idempotent commit gives its lease back in its transaction too.
      const opening = { owner: { userId: "fold" }, lease: { ttlMs: 10_000 }, last: 20 };
      const first = await store.openTurn!(id, opening);
      await store.appendMessages(id, [{ role: "user", content: "once" }], {
        fence: first.lease.fence,
        releaseLease: true,
        operationId: "op-1",
      });
      const retry = await store.openTurn!(id, opening);
      await store.appendMessages(id, [{ role: "user", content: "once" }], {
        fence: retry.lease.fence,
        releaseLease: true,
        operationId: "op-1",
      });
      expect(releases()).toBe(4);
      await retry.lease.release();
      expect(releases()).toBe(4);
      await (await store.acquireLease(id, { waitMs: 100 })).release();
      raw.close();
    } finally {
      await store.close();
    }
  });

  it("waits for another connection's write lock with the event loop free: the grant and the commit try again", async () => {
    const path = freshPath();
    const store = createSqliteStore({ path, crossProcessLease: true });
    const id = newSessionId();
    await store.createSession({ id, userId: "busy" });
    // The other connection lives on a thread of its own and lets the lock go when this thread asks,
    // which it can only do while its event loop is free: a store that waited in SQLite's busy handler
    // would hold this thread until the holder gave up on being asked (4 s, inside the store's 5 s busy
    // timeout), and the holder says which it was. No timer of this thread decides anything, so a
    // loaded machine that runs it late cannot fail the test.
    const holder = lockHolder(path);
    try {
      const whileLocked = async <T>(write: () => Promise<T>): Promise<T> => {
        await holder.hold();
        const written = write();
        // Two loop turns: the store has tried once, found the lock taken and yielded.
        await new Promise((resolve) => setImmediate(resolve));
        await new Promise((resolve) => setImmediate(resolve));
        const [result, released] = await Promise.all([written, holder.release()]);
        expect(released).toBe("asked");
        return result;
      };
      const turn = await whileLocked(() =>
        store.openTurn!(id, { owner: { userId: "busy" }, lease: { ttlMs: 10_000 }, last: 20 }),
      );
      expect(turn.status).toBe("ok");
      const stored = await whileLocked(() =>
        store.appendMessages(id, [{ role: "user", content: "after the lock" }], {
          fence: turn.lease.fence,
          releaseLease: true,
        }),
      );
      expect(stored.map((m) => m.content)).toEqual(["after the lock"]);
      await turn.lease.release();
      const raw = new Database(path, { readonly: true });
      expect(raw.prepare("SELECT expires_at FROM turn_leases WHERE session_id = ?").pluck().get(id)).toBe(0);
      raw.close();
    } finally {
      await holder.close();
      await store.close();
    }
  });

  it("hands the lease on when a holder in another process dies, and skips a dead waiter", async () => {
    const path = freshPath();
    const store = createSqliteStore({ path, crossProcessLease: true });
    try {
      const id = newSessionId();
      await store.createSession({ id, userId: "crash" });
      const raw = new Database(path);
      // A dead holder (its lease never released) and a dead waiter (its ticket never refreshed).
      raw.prepare("INSERT INTO turn_leases (session_id, fence, expires_at) VALUES (?, 0, ?)").run(id, Date.now() + 200);
      raw.prepare("INSERT INTO turn_queue (session_id, alive_until) VALUES (?, ?)").run(id, Date.now() + 300);
      const started = Date.now();
      const next = await store.acquireLease(id, { waitMs: 5_000 });
      expect(Date.now() - started).toBeLessThan(3_000);
      expect(next.fence).toBeGreaterThan(0);
      expect(raw.prepare("SELECT count(*) FROM turn_queue WHERE session_id = ?").pluck().get(id)).toBe(0);
      await next.release();
      raw.close();
    } finally {
      await store.close();
    }
  });
});

describe("sqlite store specifics", () => {
  const { storeAt } = sqliteStoresPerTest();
  afterEach(async () => {
    vi.restoreAllMocks();
  });

  it("creates the parent directory and uses WAL", async () => {
    const path = freshPath();
    await storeAt(path).createSession({ id: newSessionId(), userId: "u" });
    expect(statSync(path).isFile()).toBe(true);
    const db = new Database(path, { readonly: true });
    expect(db.pragma("journal_mode", { simple: true })).toBe("wal");
    expect(db.pragma("user_version", { simple: true })).toBe(SQLITE_SCHEMA_VERSION);
    db.close();
  });

  it("refuses a database from a newer schema and leaves it untouched", async () => {
    const path = freshPath();
    openSqliteDatabase({ path, busyTimeoutMs: 100, synchronous: "normal" }).close();
    const db = new Database(path);
    db.pragma(`user_version = ${SQLITE_SCHEMA_VERSION + 1}`);
    db.close();
    const before = statSync(path).mtimeMs;
    await expectCode(storeAt(path).getSession(newSessionId()), "schema_version_unsupported");
    const check = new Database(path, { readonly: true });
    expect(check.pragma("user_version", { simple: true })).toBe(SQLITE_SCHEMA_VERSION + 1);
    check.close();
    expect(statSync(path).mtimeMs).toBe(before);
  });

  it("migrates an older database forward and indexes its messages for full text", async () => {
    const path = freshPath();
    const old = openSqliteDatabase({ path, busyTimeoutMs: 100, synchronous: "normal", targetVersion: 1 });
    const id = newSessionId();
    const insert = (sql: string, ...params: unknown[]) => old.prepare(sql).run(...params);
    const body = JSON.stringify({ role: "user", content: "Remember the Zebra crossing" });
    insert("INSERT INTO sessions (id, user_id, created_at, last_activity_at) VALUES (?, 'u', 1, 1)", id);
    insert("INSERT INTO messages (session_id, seq, created_at, body) VALUES (?, 1, 1, ?)", id, body);
    insert("INSERT INTO message_text (session_id, seq, search_text) VALUES (?, 1, 'remember the zebra crossing')", id);
    old.close();
    const store = storeAt(path);
    expect((await store.getMessages(id)).map((m) => m.content)).toEqual(["Remember the Zebra crossing"]);
    const hits = await store.search({ userId: "u", text: "zebra", mode: "fulltext" });
    expect(hits.map((h) => [h.sessionId, h.seq])).toEqual([[id, 1]]);
    const db = new Database(path, { readonly: true });
    expect(db.pragma("user_version", { simple: true })).toBe(SQLITE_SCHEMA_VERSION);
    db.close();
  });

  it("migrates a version 7 file (search text apart, a full-text queue): data, listing, expiry and search work", async () => {
    const path = freshPath();
    const old = sqliteV7File(path);
    const [a, b, c] = [newSessionId(), newSessionId(), newSessionId()];
    const hour = 3_600_000;
    old.session(a, "u", 10 * hour + 5);
    old.session(b, "u", 10 * hour + 9);
    old.session(c, "u", 1);
    old.message(a, 1, "Indexed Zebra");
    old.message(b, 1, "indexed zebra too");
    // Indexed as version 7 did (the queue emptied), then one more message left waiting in the queue.
    old.db.exec(`INSERT INTO messages_fts (rowid, search_text, scope)
      SELECT t.id, t.search_text, 'o' || lower(hex(s.user_id)) || '0 s' || lower(hex(t.session_id)) || '0'
      FROM fts_pending p JOIN message_text t ON t.id = p.id JOIN sessions s ON s.id = t.session_id;
      DELETE FROM fts_pending;`);
    old.message(a, 2, "queued zebra");
    old.close();

    const store = storeAt(path);
    expect((await store.getMessages(a)).map((m) => m.content)).toEqual(["Indexed Zebra", "queued zebra"]);
    const hits = await store.search({ userId: "u", text: "zebra", mode: "fulltext" });
    expect(hits.map((h) => [h.sessionId, h.seq]).sort()).toEqual(
      [
        [a, 1],
        [a, 2],
        [b, 1],
      ].sort(),
    );
    expect((await store.search({ userId: "u", text: "ZEBRA TOO", mode: "substring" })).map((h) => h.sessionId)).toEqual(
      [b],
    );
    expect((await store.listSessions("u")).sessions.map((s) => s.id)).toEqual([b, a, c]);
    expect(await store.expire(2)).toEqual([c]);
    // Written after the migration: appended, indexed, deleted from the index with its message.
    await store.appendMessages(b, [{ role: "user", content: "fresh zebra" }]);
    expect((await store.listSessions("u")).sessions.map((s) => s.id)).toEqual([b, a]);
    expect(
      (await store.search({ userId: "u", text: "fresh", mode: "fulltext" })).map((h) => [h.sessionId, h.seq]),
    ).toEqual([[b, 2]]);
    await store.popMessage(b);
    expect(await store.search({ userId: "u", text: "fresh", mode: "fulltext" })).toEqual([]);
    const db = new Database(path, { readonly: true });
    expect(db.pragma("user_version", { simple: true })).toBe(SQLITE_SCHEMA_VERSION);
    expect(db.prepare("SELECT name FROM sqlite_schema WHERE name IN ('message_text', 'fts_pending')").all()).toEqual(
      [],
    );
    db.close();
  });

  it("quarantines a corrupt message and keeps reading the rest", async () => {
    const path = freshPath();
    const store = storeAt(path);
    const session = await store.createSession({ id: newSessionId(), userId: "u" });
    await store.appendMessages(
      session.id,
      ["one", "two", "three"].map((content) => ({ role: "user", content })),
    );
    const raw = new Database(path);
    raw
      .prepare('UPDATE messages SET body = \'{"role": "user", "cont\' WHERE session_id = ? AND seq = 2')
      .run(session.id);
    const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
    expect((await store.getMessages(session.id)).map((m) => m.content)).toEqual(["one", "three"]);
    expect(warn).toHaveBeenCalledOnce();
    expect(String(warn.mock.calls[0][0])).toContain(session.id);
    const moved = raw.prepare("SELECT session_id, seq, record, raw FROM quarantine").all();
    expect(moved).toEqual([{ session_id: session.id, seq: 2, record: "message", raw: '{"role": "user", "cont' }]);
    raw.close();
    expect(await store.countMessages(session.id)).toBe(2);
    expect((await store.appendMessages(session.id, [{ role: "user", content: "four" }]))[0].seq).toBe(4);
    // The cap counts rows, not seqs: the quarantine gap at seq 2 does not make it drop one too many.
    await store.appendMessages(session.id, [{ role: "user", content: "five" }], { maxMessages: 3 });
    expect((await store.getMessages(session.id)).map((m) => m.content)).toEqual(["three", "four", "five"]);
  });

  it("quarantines corrupt session metadata and state instead of failing the session", async () => {
    const path = freshPath();
    const store = storeAt(path);
    const session = await store.createSession({ id: newSessionId(), userId: "u", metadata: { a: 1 } });
    await store.setState(session.id, { k: 1 }, 0);
    const raw = new Database(path);
    raw.prepare("UPDATE sessions SET metadata = 'nope', state = '[oops' WHERE id = ?").run(session.id);
    vi.spyOn(console, "warn").mockImplementation(() => {});
    expect((await store.getSession(session.id))?.metadata).toEqual({});
    expect(await store.getState(session.id)).toEqual({ version: 1, data: {} });
    expect((await store.setState(session.id, { k: 2 }, 1)).version).toBe(2);
    expect(raw.prepare("SELECT record FROM quarantine ORDER BY id").pluck().all()).toEqual(["metadata", "state"]);
    raw.close();
  });

  it("reads the last 20 of a 10,000-message session through the primary key", async () => {
    const path = freshPath();
    const store = storeAt(path);
    const session = await store.createSession({ id: newSessionId(), userId: "u" });
    for (let batch = 0; batch < 100; batch++) {
      await store.appendMessages(
        session.id,
        Array.from({ length: 100 }, (_, i) => ({
          role: "user" as const,
          content: `m${batch * 100 + i + 1}`,
        })),
      );
    }
    const last = await store.getMessages(session.id, { last: 20 });
    expect(last.map((m) => m.seq)).toEqual(Array.from({ length: 20 }, (_, i) => 9981 + i));
    const db = new Database(path, { readonly: true });
    // Both forms the store runs: the plain "last N" and the one with seq bounds.
    for (const [sql, params] of [
      [newestMessagesSql(20), [session.id]],
      [RANGE_NEWEST_FIRST_SQL, [session.id, 0, 1e9, 20]],
    ] as const) {
      const plan = db
        .prepare(`EXPLAIN QUERY PLAN ${sql}`)
        .all(...params)
        .map((row) => (row as { detail: string }).detail)
        .join("\n");
      expect(plan).toMatch(/SEARCH m USING (INDEX|PRIMARY KEY)/);
      expect(plan).not.toMatch(/SCAN|TEMP B-TREE/);
    }
    db.close();
  });

  it("lists by owner and expires through the hour indexes, sorting only within an hour; finds waiting sessions through the queue", () => {
    const db = openSqliteDatabase({ path: ":memory:", busyTimeoutMs: 100, synchronous: "normal" });
    const plan = (sql: string, ...params: unknown[]) =>
      db
        .prepare(`EXPLAIN QUERY PLAN ${sql}`)
        .all(...params)
        .map((row) => (row as { detail: string }).detail)
        .join("\n");
    const list = plan(LIST_AFTER_SQL, "u", 1, 1, "x", 10);
    const expire = plan(INACTIVE_SESSIONS_SQL, 1, 1, 1, 200);
    const waiting = plan(PENDING_OF_OWNER_SQL, "u", 10);
    db.close();
    expect(list).toMatch(/SEARCH sessions USING INDEX sessions_by_owner \(user_id=\? AND active_hour<\?\)/);
    expect(list).toMatch(/TEMP B-TREE FOR LAST 2 TERMS OF ORDER BY/);
    expect(list).not.toMatch(/TEMP B-TREE FOR ORDER BY/);
    expect(expire).toMatch(/SEARCH sessions USING (COVERING )?INDEX sessions_by_activity \(active_hour<\?\)/);
    // A search's "what of this owner waits for the index" walks the small queue, not the owner's sessions.
    expect(waiting).toMatch(/SCAN w/);
    expect(waiting).toMatch(/SEARCH s USING INTEGER PRIMARY KEY \(rowid=\?\)/);
  });

  it("turns driver failures into store_unavailable and refuses work after close", async () => {
    const path = freshPath();
    const store = storeAt(path);
    const session = await store.createSession({ id: newSessionId(), userId: "u" });
    const locker = new Database(path);
    locker.exec("BEGIN EXCLUSIVE");
    const busy = storeAt(path, { busyTimeoutMs: 50 });
    await expectCode(busy.appendMessages(session.id, [{ role: "user", content: "x" }]), "store_unavailable");
    locker.exec("ROLLBACK");
    locker.close();
    await store.close();
    await expectCode(store.getSession(session.id), "store_unavailable");
  });

  it("keeps an in-memory database when asked", async () => {
    const store = storeAt(":memory:");
    expect(store.capabilities.persistent).toBe(false);
    const session = await store.createSession({ id: newSessionId(), userId: "u" });
    expect((await store.appendMessages(session.id, [{ role: "user", content: "hi" }]))[0].seq).toBe(1);
  });
});

/**
 * A connection to `path` on a worker thread of its own that takes the write lock (`hold`) and lets it
 * go when asked (`release`, resolving "asked"), or by itself after 4 s ("unasked": the asking thread
 * could not run for that long).
 */
function lockHolder(path: string) {
  const worker = new Worker(
    `const { parentPort, workerData } = require("node:worker_threads");
     const db = new (require(workerData.driver))(workerData.path);
     let giveUp;
     const commit = (how) => { clearTimeout(giveUp); giveUp = undefined; db.exec("COMMIT"); parentPort.postMessage(how); };
     parentPort.on("message", (cmd) => {
       if (cmd === "hold") {
         db.exec("BEGIN IMMEDIATE");
         giveUp = setTimeout(() => commit("unasked"), 4000);
         parentPort.postMessage("held");
       } else if (cmd === "release" && giveUp !== undefined) commit("asked");
       else if (cmd === "close") { db.close(); parentPort.close(); }
     });`,
    { eval: true, workerData: { path, driver: createRequire(import.meta.url).resolve("better-sqlite3") } },
  );
  const next = () =>
    new Promise<string>((resolve, reject) => {
      worker.once("message", resolve);
      worker.once("error", reject);
    });
  let released: Promise<string> | undefined;
  return {
    async hold(): Promise<void> {
      const held = next();
      worker.postMessage("hold");
      expect(await held).toBe("held");
      released = next();
    },
    release(): Promise<string> {
      worker.postMessage("release");
      return released!;
    },
    async close(): Promise<void> {
      worker.postMessage("close");
      await new Promise((resolve) => worker.once("exit", resolve));
    },
  };
}
