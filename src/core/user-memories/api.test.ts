import { afterEach, describe, expect, it, vi } from "vitest";
import { createMemory } from "../../create-memory.js";
import { createMemoryStore } from "../../stores/in-process/index.js";
import { newSessionId } from "../ids.js";

describe("memory.memories: a memory's source session", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it("reads as deleted once the session is deleted, expired (swept or not) or never was the user's", async () => {
    vi.useFakeTimers({ toFake: ["Date"], now: Date.UTC(2026, 0, 1) });
    const memory = createMemory({ store: createMemoryStore({ ttlMs: 0 }), ttlMs: 60_000 });
    const alice = { userId: "alice" };
    const [kept, deleted, expired, bobs] = [newSessionId(), newSessionId(), newSessionId(), newSessionId()];
    await memory.addMessages(expired, [{ role: "user", content: "soon past the TTL" }], alice);
    vi.setSystemTime(Date.now() + 61_000);
    for (const id of [kept, deleted]) await memory.addMessages(id, [{ role: "user", content: "hello" }], alice);
    await memory.addMessages(bobs, [{ role: "user", content: "bob's" }], { userId: "bob" });
    const add = (sessionId: string) =>
      memory.memories.add({ text: `from ${sessionId}`, source: { kind: "session", sessionId, seqs: [1] } }, alice);
    const ids = {
      kept: (await add(kept)).id,
      deleted: (await add(deleted)).id,
      expired: (await add(expired)).id,
      bobs: (await add(bobs)).id,
    };
    const bad = (await add("not-a-session-id")).id;
    const hand = (await memory.memories.add({ text: "by hand" }, alice)).id;
    await memory.deleteSession(deleted, alice);

    const gone = async (id: string) => {
      const found = await memory.memories.get(id, alice);
      return found?.source.kind === "session" ? found.source.sessionDeleted : "hand";
    };
    expect(await gone(ids.kept)).toBe(false);
    expect(await gone(ids.deleted)).toBe(true);
    expect(await gone(ids.expired)).toBe(true);
    expect(await gone(ids.bobs)).toBe(true);
    expect(await gone(bad)).toBe(true);
    expect(await gone(hand)).toBe("hand");
    // The text stays; the listing says the same; nothing is stored of the flag.
    const { memories } = await memory.memories.list(alice);
    expect(memories.find((m) => m.id === ids.deleted)).toMatchObject({
      text: `from ${deleted}`,
      source: { sessionDeleted: true },
    });
    expect(memories.find((m) => m.id === ids.kept)?.source).toMatchObject({ sessionDeleted: false });
    const stored = await (await memory.store()).getUserMemory("alice", ids.deleted);
    expect(stored?.source).toEqual({ kind: "session", sessionId: deleted, seqs: [1] });
    // Reading did not sweep the expired session: that is the sweep's job.
    expect(await (await memory.store()).getSession(expired)).not.toBeNull();
    await memory.close();
  });
});
