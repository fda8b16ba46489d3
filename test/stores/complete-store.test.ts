// completeStore: what it lays over a store that implements only the required contract, what it
// refuses with capability_missing, and that the built-in stores pass through it untouched.
import { describe, expect, it } from "vitest";
import { createMemory, createMemoryStore, ERROR_STATUS, newSessionId, type Summarizer } from "../../src/index.js";
import { completeStore, DERIVED_SEARCH_BOUNDS } from "../../src/stores/kit.js";
import { storeBehind } from "../../src/core/store/complete.js";
import { createSqliteStore } from "../../src/stores/sqlite/index.js";
import { expectCode } from "../../src/testing/index.js";
import { createMapStore } from "../fixtures/minimal-store.js";

const say = (content: string, role: "user" | "assistant" = "user") => ({ role, content });

async function minimal() {
  const store = completeStore(createMapStore());
  const session = await store.createSession({ id: newSessionId(), userId: "ann" });
  return { store, id: session.id };
}

describe("completeStore", () => {
  it("returns a built-in store that implements everything as it is, and is idempotent", async () => {
    const sqlite = createSqliteStore({ path: ":memory:" });
    expect(completeStore(sqlite)).toBe(sqlite);
    // The memory store has no combined turn: only openTurn is laid over it.
    const memory = createMemoryStore();
    const filled = completeStore(memory);
    expect(filled).not.toBe(memory);
    expect(Object.getPrototypeOf(filled)).toBe(memory);
    expect(storeBehind(filled)).toBe(memory);
    expect(completeStore(filled)).toBe(filled);
    await Promise.all([sqlite.close(), memory.close()]);
  });

  it("refuses what it cannot derive with capability_missing (501), naming the store and the capability", async () => {
    const { store, id } = await minimal();
    expect(ERROR_STATUS.capability_missing).toBe(501);
    await expectCode(store.setState(id, { a: 1 }, 0), "capability_missing");
    await expectCode(store.saveSummary(id, { fromSeq: 1, toSeq: 1, content: "s" }), "capability_missing");
    await expectCode(store.switchBranch(id, 1), "capability_missing");
    await expectCode(
      store.saveBranch(id, { atSeq: 0, parentId: null, reason: "fork", createdAt: 1, messages: [] }),
      "capability_missing",
    );
    await expectCode(store.listAllSessions(), "capability_missing");
    await expectCode(store.expire(Date.now()), "capability_missing");
    await store.setState(id, {}, 0).catch((error: { message: string; details?: unknown }) => {
      expect(error.message).toMatch(/map store has no state/);
      expect(error.details).toEqual({ store: "map", capability: "state" });
    });
    // Reads answer as for a store that never kept any.
    expect(await store.getState(id)).toEqual({ version: 0, data: {} });
    expect(await store.listSummaries(id)).toEqual([]);
    expect(await store.listBranches(id)).toEqual([]);
  });

  it("replaces a tail without a branch, and refuses one that asks to keep the tail, changing nothing", async () => {
    const { store, id } = await minimal();
    await store.appendMessages(id, [say("q"), say("a1", "assistant")]);
    await expectCode(
      store.replaceAfter(id, 1, [say("a2", "assistant")], { branch: { reason: "regenerate" } }),
      "capability_missing",
    );
    expect((await store.getMessages(id)).map((m) => m.content)).toEqual(["q", "a1"]);
    const replaced = await store.replaceAfter(id, 1, [say("a2", "assistant")], { expectedLastSeq: 2 });
    expect(replaced.map((m) => [m.seq, m.content])).toEqual([[2, "a2"]]);
    // Nothing removed: a branch asked for is simply not made, as on every store.
    expect((await store.replaceAfter(id, 2, [say("more")], { branch: { reason: "edit" } })).map((m) => m.seq)).toEqual([
      3,
    ]);
    await expectCode(store.replaceAfter(id, 1, [say("x")], { expectedLastSeq: 2 }), "history_conflict");
  });

  it("searches substrings over reads, newest first, within one owner, and counts by reading", async () => {
    const { store, id } = await minimal();
    const other = await store.createSession({ id: newSessionId(), userId: "bob" });
    await store.appendMessages(id, [say("the pottery class is on Tuesday"), say("Pottery again", "assistant")]);
    await store.appendMessages(other.id, [say("my pottery")]);
    const hits = await store.search({ userId: "ann", text: "POTTERY" });
    expect(hits.map((h) => [h.sessionId, h.seq])).toEqual([
      [id, 2],
      [id, 1],
    ]);
    await expectCode(store.search({ userId: "ann", text: "x", mode: "fulltext" }), "not_supported");
    expect(await store.countMessages(id)).toBe(2);
    expect(DERIVED_SEARCH_BOUNDS.sessions).toBeGreaterThan(0);
  });

  it("checks the owner and the session's incarnation before a write the store cannot check itself", async () => {
    const { store, id } = await minimal();
    await expectCode(store.appendMessages(id, [say("x")], { owner: { userId: "mallory" } }), "session_not_found");
    await expectCode(store.getMessages(id, { owner: { userId: "mallory" } }), "session_not_found");
    await expectCode(store.appendMessages(id, [say("x")], { sessionCreatedAt: 1 }), "session_not_found");
    expect(await store.countMessages(id)).toBe(0);
  });

  it("gives a lease back after a write with releaseLease, so the next turn need not wait for it to lapse", async () => {
    const { store, id } = await minimal();
    const lease = await store.acquireLease(id, { ttlMs: 60_000 });
    await store.appendMessages(id, [say("hi")], { fence: lease.fence, releaseLease: true });
    const next = await store.acquireLease(id, { waitMs: 200 });
    await next.release();
  });
});

describe("Memory over a store with only the required methods", () => {
  it("keeps a conversation, caps it, searches it and opens turns", async () => {
    const memory = createMemory({ store: createMapStore(), maxMessages: 4 });
    const id = newSessionId();
    for (let i = 1; i <= 3; i++)
      await memory.addMessages(id, [say(`question ${i}`), say(`answer ${i}`, "assistant")], { userId: "ann" });
    expect((await memory.getMessages(id, { userId: "ann" })).map((m) => m.seq)).toEqual([3, 4, 5, 6]);
    expect((await memory.search("answer 3", { userId: "ann" })).map((h) => h.seq)).toEqual([6]);
    await expectCode(memory.getMessages(id, { userId: "bob" }), "session_not_found");
    const read = await memory.runTurn(
      id,
      async (lease, preloaded) => {
        await memory.addMessages(id, [say("question 4"), say("answer 4", "assistant")], {
          userId: "ann",
          fence: lease.fence,
        });
        return preloaded?.messages.length;
      },
      { userId: "ann", preload: true },
    );
    expect(read).toBe(4);
    expect((await memory.getMessages(id, { userId: "ann", last: 1 }))[0].content).toBe("answer 4");
    await memory.close();
  });

  it("refuses a summarizer up front: the store could not keep what it writes", async () => {
    const summarizer: Summarizer = { summarize: async () => "never called" };
    const memory = createMemory({ store: createMapStore(), summarizer });
    await expectCode(memory.addMessages(newSessionId(), [say("hi")], { userId: "ann" }), "capability_missing");
    await memory.close().catch(() => {});
  });
});
