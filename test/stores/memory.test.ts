import { describe, expect, it } from "vitest";
import { newSessionId } from "../../src/core/ids.js";
import { createMemoryStore } from "../../src/stores/in-process/index.js";
import { runStoreConformance } from "../../src/testing/index.js";

// TTL off here: the suite plants sessions with old activity times on purpose; eviction is tested below.
runStoreConformance("memory", () => createMemoryStore({ ttlMs: 0 }), {
  withTtl: (ttlMs) => createMemoryStore({ ttlMs, sweepIntervalMs: 0 }),
});

describe("memory store specifics", () => {
  it("evicts sessions inactive past the TTL on access", async () => {
    const store = createMemoryStore({ ttlMs: 50 });
    const s = await store.createSession({ id: newSessionId(), userId: "u" });
    expect(await store.getSession(s.id)).not.toBeNull();
    await new Promise((r) => setTimeout(r, 80));
    expect(await store.getSession(s.id)).toBeNull();
    expect((await store.listSessions("u")).sessions).toEqual([]);
    await store.close();
  });

  it("stays bounded by evicting the least recently active session", async () => {
    const store = createMemoryStore({ maxSessions: 3 });
    const ids = [];
    for (let i = 0; i < 3; i++) ids.push((await store.createSession({ id: newSessionId(), userId: "u" })).id);
    await store.touchSession(ids[0]);
    const fourth = await store.createSession({ id: newSessionId(), userId: "u" });
    expect(await store.getSession(ids[1])).toBeNull();
    expect(await store.getSession(ids[0])).not.toBeNull();
    expect(await store.getSession(fourth.id)).not.toBeNull();
    await store.close();
  });

  it("refuses work after close", async () => {
    const store = createMemoryStore();
    await store.close();
    await expect(store.getSession(newSessionId())).rejects.toMatchObject({ code: "store_unavailable" });
  });
});
