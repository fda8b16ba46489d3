import { describe, expect, it } from "vitest";
import { createMemoryStore } from "../stores/in-process/index.js";
import { newSessionId } from "./ids.js";
import { createMemory } from "../create-memory.js";
import type { SessionStore } from "./types.js";

const READS = ["getSession", "getMessages", "listSummaries", "getState", "countMessages"] as const;

/** The memory store, counting the reads made through it. */
function countingStore(): { store: SessionStore; reads: () => number } {
  const inner = createMemoryStore({ ttlMs: 0 });
  let reads = 0;
  const store = new Proxy(inner, {
    get(target, name, receiver) {
      const value = Reflect.get(target, name, receiver);
      if (typeof value !== "function") return value;
      return (...args: unknown[]) => {
        if ((READS as readonly (string | symbol)[]).includes(name)) reads++;
        return value.apply(target, args);
      };
    },
  });
  return { store, reads: () => reads };
}

describe("Memory.runTurn with preload", () => {
  it("hands the turn its context read with the lease, and buildContext then reads nothing more", async () => {
    const { store, reads } = countingStore();
    const memory = createMemory({ store, window: 4, ttlMs: 0 });
    const id = newSessionId();
    await memory.addMessages(
      id,
      [1, 2, 3, 4, 5, 6].map((i) => ({ role: "user" as const, content: `m${i}` })),
      { userId: "alice" },
    );
    await memory.updateState(id, () => ({ topic: "tea" }), { userId: "alice" });
    const context = await memory.runTurn(
      id,
      async (lease, preloaded) => {
        expect(preloaded?.session?.id).toBe(id);
        expect(preloaded?.messages.map((m) => m.seq)).toEqual([3, 4, 5, 6]);
        expect(preloaded?.state.data).toEqual({ topic: "tea" });
        const before = reads();
        const built = await memory.buildContext(id, {
          userId: "alice",
          preloaded,
          input: [{ role: "user", content: "next" }],
        });
        expect(reads()).toBe(before);
        await memory.addMessages(id, [{ role: "user", content: "next" }], {
          userId: "alice",
          fence: lease.fence,
          session: preloaded?.session ?? undefined,
          releaseLease: true,
        });
        return built;
      },
      { userId: "alice", preload: true },
    );
    expect(context.messages.map((m) => m.content)).toEqual(["m3", "m4", "m5", "m6", "next"]);
    // The lease was given back: the next turn need not wait.
    await memory.runTurn(id, async () => {}, { waitMs: 50 });
    expect((await memory.getMessages(id, { userId: "alice" })).at(-1)?.content).toBe("next");
    await memory.close();
  });

  it("refuses another owner's session before fn runs, and leaves the lease free", async () => {
    const memory = createMemory({ store: createMemoryStore({ ttlMs: 0 }), ttlMs: 0 });
    const id = newSessionId();
    await memory.addMessages(id, [{ role: "user", content: "private" }], { userId: "alice" });
    let ran = false;
    await expect(
      memory.runTurn(
        id,
        async () => {
          ran = true;
        },
        { userId: "bob", preload: true },
      ),
    ).rejects.toMatchObject({ code: "session_not_found" });
    expect(ran).toBe(false);
    await memory.runTurn(id, async () => {}, { waitMs: 50 });
    await memory.close();
  });

  it("reads a missing session as new, and deletes an expired one first", async () => {
    const store = createMemoryStore({ ttlMs: 0 });
    const memory = createMemory({ store, ttlMs: 60_000 });
    const fresh = newSessionId();
    const none = await memory.runTurn(fresh, async (_lease, preloaded) => preloaded, {
      userId: "alice",
      preload: true,
    });
    expect(none).toMatchObject({ session: null, messages: [] });
    const old = newSessionId();
    await store.createSession({ id: old, userId: "alice", createdAt: Date.now() - 120_000 });
    await store.appendMessages(old, [{ role: "user", content: "long ago" }]);
    await store.touchSession(old, Date.now() - 120_000);
    const expired = await memory.runTurn(old, async (_lease, preloaded) => preloaded, {
      userId: "alice",
      preload: true,
    });
    expect(expired).toMatchObject({ session: null, messages: [] });
    expect(await store.getSession(old)).toBeNull();
    await memory.close();
  });
});
