/**
 * Deleting many sessions at once on SQLite, the store whose calls answer without I/O, so nothing
 * yields unless the code does: the expiry sweep (`expire`, run by `serve` in the background with its
 * default TTL of 7 days) deleted every expired session in one transaction, and `Memory.eraseUser` (a
 * person's "erase my data") deleted a user's sessions in a loop of awaits that never let the event loop
 * go. With 500 sessions of 200 messages they held it 1.2 s and 1.4 s (issue 34: another user's request
 * waits at most 250 ms). Now the sweep deletes in steps of about 10 ms and the erasure yields after
 * each session.
 */
import { describe, expect, it } from "vitest";
import { createMemory } from "../../src/create-memory.js";
import { newSessionId } from "../../src/core/ids.js";
import type { FullStore } from "../../src/core/types.js";
import { createSqliteStore } from "../../src/stores/sqlite/index.js";
import { listSessionsMeanwhile, withinLoopBound } from "../_event-loop-gaps.js";
import { sqliteTempFiles } from "./_sqlite-files.js";

const { freshPath } = sqliteTempFiles("threadkeep-sqlite-expiry-erase-loop-");
const SESSIONS = 150;
const PER_SESSION = 200;
/** The longest the deletion may hold the loop (its steps are ~10 ms; in one go it held ~360 ms here). */
const HOLD_BOUND_MS = 100;
/** The longest the other user's listing may take (the bound). */
const BOUND_MS = 250;

/** `SESSIONS` sessions of `PER_SESSION` messages for `userId`, the loop free between sessions. */
async function fill(store: FullStore, userId: string): Promise<string[]> {
  const ids: string[] = [];
  for (let s = 0; s < SESSIONS; s++) {
    const id = newSessionId();
    await store.createSession({ id, userId });
    await store.appendMessages(
      id,
      Array.from({ length: PER_SESSION }, (_, i) => ({
        role: i % 2 ? ("assistant" as const) : ("user" as const),
        content: `message ${i} of session ${s}: apples, pears and the weather`,
      })),
    );
    ids.push(id);
    await new Promise((resolve) => setImmediate(resolve));
  }
  // Indexed for full text, so the deletion also takes the rows out of the index, as it does in a server.
  await store.search({ userId, text: "apples", mode: "fulltext" });
  return ids;
}

/** Another user with one session, created after `fill` (so after any cutoff taken between them). */
async function otherUser(store: FullStore): Promise<string> {
  const id = newSessionId();
  await store.createSession({ id, userId: "other" });
  await store.appendMessages(id, [{ role: "user", content: "hello" }]);
  return id;
}

describe("sqlite deletions of many sessions and the event loop", () => {
  it("expires 150 sessions of 200 messages in steps: every one deleted, another user's requests within 250 ms", async () => {
    const store = createSqliteStore({ path: freshPath() });
    try {
      const expiring = await fill(store, "big");
      await new Promise((resolve) => setTimeout(resolve, 5));
      const cutoff = Date.now();
      await new Promise((resolve) => setTimeout(resolve, 5));
      const other = await otherUser(store);
      const lister = listSessionsMeanwhile(store, "other", [other]);
      await new Promise((resolve) => setTimeout(resolve, 1));
      const { value: expired, longestMs } = await withinLoopBound(
        `expiring ${SESSIONS} sessions of ${PER_SESSION} messages`,
        HOLD_BOUND_MS,
        () => store.expire(cutoff),
      );
      await lister.stop();
      expect(expired.sort()).toEqual([...expiring].sort());
      expect((await store.listSessions("big")).sessions).toEqual([]);
      expect(await store.search({ userId: "big", text: "apples", mode: "fulltext" })).toEqual([]);
      expect(lister.listed).toBeGreaterThan(0);
      expect(lister.slowest).toBeLessThanOrEqual(BOUND_MS);
      expect(longestMs).toBeLessThanOrEqual(HOLD_BOUND_MS);
      // Nothing left to expire: an empty sweep.
      expect(await store.expire(cutoff)).toEqual([]);
    } finally {
      await store.close();
    }
  }, 120_000);

  it("erases a user of 150 sessions of 200 messages, yielding after each, another user's requests within 250 ms", async () => {
    const store = createSqliteStore({ path: freshPath() });
    const memory = createMemory({ store });
    try {
      await fill(store, "big");
      const other = await otherUser(store);
      const lister = listSessionsMeanwhile(store, "other", [other]);
      await new Promise((resolve) => setTimeout(resolve, 1));
      const { value: erased } = await withinLoopBound(`erasing a user of ${SESSIONS} sessions`, HOLD_BOUND_MS, () =>
        memory.eraseUser("big"),
      );
      await lister.stop();
      expect(erased.sessions).toBe(SESSIONS);
      expect((await store.listSessions("big")).sessions).toEqual([]);
      expect(lister.listed).toBeGreaterThan(0);
      expect(lister.slowest).toBeLessThanOrEqual(BOUND_MS);
    } finally {
      await memory.close();
    }
  }, 120_000);
});
