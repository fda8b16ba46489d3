import { closeSync, existsSync, mkdtempSync, openSync, readSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, describe, expect, it } from "vitest";
import { newSessionId } from "../../src/core/ids.js";
import { createSqliteStore } from "../../src/stores/sqlite/index.js";

/**
 * A message of about 24 KB: its overflow pages make an append write about eight pages of log, as a short
 * message did before the schema wrote two (v8), so the page counts below hold.
 */
const padded = (content: string) => `${content} ${"x".repeat(24_000)}`;

const dir = mkdtempSync(join(tmpdir(), "threadkeep-sqlite-checkpoint-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The WAL header's salts (bytes 16–23), which change whenever the log starts over. */
function walSalt(path: string): Buffer {
  const salt = Buffer.alloc(8);
  const fd = openSync(`${path}-wal`, "r");
  readSync(fd, salt, 0, 8, 16);
  closeSync(fd);
  return salt;
}

/** Bytes of a WAL holding `pages` 4 KiB pages (a 32-byte header, a 24-byte header per frame). */
const walBytes = (pages: number) => 32 + pages * (24 + 4096);

describe("sqlite store checkpoints", () => {
  it("checkpoints the log in a worker, not in a commit, and the log starts over between bursts of writes", async () => {
    const path = join(dir, "bursts", "threadkeep.db");
    const store = createSqliteStore({ path });
    const session = await store.createSession({ id: newSessionId(), userId: "u" });
    let appended = 0;
    const append = (content: string) => {
      appended++;
      return store.appendMessages(session.id, [{ role: "user", content: padded(content) }]);
    };
    // The 200th write wakes (and first starts) the worker; about 8 pages per append.
    for (let i = 0; i < 250; i++) await append(`message ${i}`);
    const first = walSalt(path);
    const grown = statSync(`${path}-wal`).size;
    // Past SQLite's default of 1,000 pages, so no commit checkpointed (that would have started the log over).
    expect(grown).toBeGreaterThan(walBytes(1_500));
    // The log starts over (new salt) at the first commit after a checkpoint that copied all of it,
    // which only the worker can have run: the store's own connection waits for the backstop.
    const deadline = Date.now() + 20_000;
    while (walSalt(path).equals(first) && Date.now() < deadline) {
      await sleep(50);
      await append("after a pause");
    }
    expect(walSalt(path).equals(first)).toBe(false);
    // A WAL file is reused from its start, so its size is the longest the log got: so far 2,350-3,850
    // pages (the worker starts late on a loaded machine).
    const longestYet = statSync(`${path}-wal`).size;
    // From then on, bursts with pauses between them (as between chat turns) keep the log short: 10,000
    // short appends, about 15,000 pages if nothing but the backstop checkpointed. (Short ones: they
    // rewrite the same few pages, as chat turns do, where the padded ones would each add new pages
    // for the worker to copy.) A burst of 250 writes about 400 pages, so a log that never outgrows the
    // padded appends' started over at least every sixth burst; where the worker restarted it only now
    // and then (one pass per wake, not passes until the log stops growing) it reached 5,200-9,300.
    // The worker needs two passes 20 ms apart with no commit between them, and its thread waits for a
    // core too: 40 ms pauses let the log reach 5,800 pages at load 15-26 on 2 cores. 200 ms is still
    // less than a model takes to answer.
    for (let burst = 0; burst < 40; burst++) {
      for (let i = 0; i < 250; i++) {
        appended++;
        await store.appendMessages(session.id, [{ role: "user", content: `burst ${burst} message ${i}` }]);
      }
      await sleep(200);
    }
    expect(statSync(`${path}-wal`).size).toBe(longestYet);
    expect(await store.countMessages(session.id)).toBe(appended);
    await store.close();
    // The worker's connection closed first, so the store's (the last one) checkpointed and removed the log.
    expect(existsSync(`${path}-wal`)).toBe(false);
  }, 60_000);

  it("checkpoints in the commit past 1,000 pages with backgroundCheckpoints off", async () => {
    const path = join(dir, "commits", "threadkeep.db");
    const store = createSqliteStore({ path, backgroundCheckpoints: false });
    const session = await store.createSession({ id: newSessionId(), userId: "u" });
    for (let i = 0; i < 300; i++)
      await store.appendMessages(session.id, [{ role: "user", content: padded(`message ${i}`) }]);
    // 300 appends wrote over 2,000 pages, but the log never held much more than 1,000.
    expect(statSync(`${path}-wal`).size).toBeLessThan(walBytes(1_100));
    expect(await store.countMessages(session.id)).toBe(300);
    await store.close();
  });

  it("closes a store whose worker never started, and one that never wrote", async () => {
    const quiet = createSqliteStore({ path: join(dir, "quiet", "threadkeep.db") });
    await quiet.close();
    const path = join(dir, "few", "threadkeep.db");
    const few = createSqliteStore({ path });
    const session = await few.createSession({ id: newSessionId(), userId: "u" });
    await few.appendMessages(session.id, [{ role: "user", content: "hello" }]);
    await few.close();
    expect(existsSync(`${path}-wal`)).toBe(false);
    const reopened = createSqliteStore({ path });
    expect((await reopened.getMessages(session.id)).map((m) => m.content)).toEqual(["hello"]);
    await reopened.close();
  });
});
