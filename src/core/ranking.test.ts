import { describe, expect, it } from "vitest";
import { createMemoryStore } from "../stores/in-process/index.js";
import { rankTurns } from "./ranking.js";
import type { MessageInput } from "./types.js";

async function storeWith(sessions: { id: string; userId: string; messages: string[] }[]) {
  const store = createMemoryStore({ ttlMs: 0 });
  for (const { id, userId, messages } of sessions) {
    await store.createSession({ id, userId, metadata: {} });
    const input: MessageInput[] = messages.map((content, i) => ({ role: i % 2 === 0 ? "user" : "assistant", content }));
    await store.appendMessages(id, input);
  }
  return store;
}

describe("rankTurns", () => {
  it("puts first the turn whose neighbours hold the rest of the query's words", async () => {
    const store = await storeWith([
      {
        id: "s-alone",
        userId: "alice",
        messages: ["We talked about the weather today.", "I adopted a puppy last week.", "Nice, the weather is fine."],
      },
      {
        id: "s-context",
        userId: "alice",
        messages: ["What name did you choose for him?", "I adopted a puppy last month.", "His name is Biscuit."],
      },
    ]);
    // Both "adopted" turns hold "adopted" and "puppy" once; only one sits between turns about its name.
    const ranked = await rankTurns(store, {
      userId: "alice",
      text: "which puppy was adopted and what name",
      limit: 10,
    });
    expect(ranked[0]).toMatchObject({ sessionId: "s-context", seq: 2 });
    expect(ranked[0].reasons.neighbours).toBeGreaterThan(0);
    expect(ranked[0].score).toBeCloseTo(ranked[0].reasons.lexical + ranked[0].reasons.neighbours);
    const alone = ranked.find((t) => t.sessionId === "s-alone" && t.seq === 2)!;
    expect(alone.reasons.neighbours).toBeLessThan(ranked[0].reasons.neighbours / 4);
    expect(alone.reasons.lexical).toBeCloseTo(ranked[0].reasons.lexical);
    expect(alone.score).toBeLessThan(ranked[0].score);
    await store.close();
  });

  it("ranks only the owner's turns, and leaves out the session it is told to", async () => {
    const store = await storeWith([
      { id: "s-mine", userId: "alice", messages: ["My sister plays the cello.", "The cello is hard to learn."] },
      { id: "s-now", userId: "alice", messages: ["Tell me about the cello again."] },
      { id: "s-theirs", userId: "bob", messages: ["Bob's sister plays the cello too.", "cello cello cello"] },
    ]);
    const all = await rankTurns(store, { userId: "alice", text: "sister cello", limit: 10 });
    expect(new Set(all.map((t) => t.sessionId))).toEqual(new Set(["s-mine", "s-now"]));
    const elsewhere = await rankTurns(store, {
      userId: "alice",
      text: "sister cello",
      limit: 10,
      excludeSessionId: "s-now",
    });
    expect(elsewhere.map((t) => [t.sessionId, t.seq])).toEqual([
      ["s-mine", 1],
      ["s-mine", 2],
    ]);
    expect(await rankTurns(store, { userId: "carol", text: "sister cello", limit: 10 })).toEqual([]);
    await store.close();
  });

  it("finds nothing for a text of stopwords, or with no limit", async () => {
    const store = await storeWith([{ id: "s-1", userId: "alice", messages: ["what is this about"] }]);
    expect(await rankTurns(store, { userId: "alice", text: "what is it", limit: 5 })).toEqual([]);
    expect(await rankTurns(store, { userId: "alice", text: "about", limit: 0 })).toEqual([]);
    await store.close();
  });

  it("stops after the search when no candidate passes unlessNone, and ranks alike when one does", async () => {
    const store = await storeWith([
      { id: "s-1", userId: "alice", messages: ["Anything new with the garden?", "The tomatoes are ripe."] },
      { id: "s-2", userId: "alice", messages: ["The cello lesson went well.", "Anything about the garden?"] },
    ]);
    let reads = 0;
    const counted = new Proxy(store, {
      get(target, name, receiver) {
        const value = Reflect.get(target, name, receiver);
        if (name !== "getMessageRanges") return typeof value === "function" ? value.bind(target) : value;
        return (...args: Parameters<typeof store.getMessageRanges>) => {
          reads++;
          return store.getMessageRanges(...args);
        };
      },
    });
    const query = { userId: "alice", text: "anything garden tomatoes", limit: 10 };
    expect(await rankTurns(counted, { ...query, unlessNone: () => false })).toEqual([]);
    expect(reads).toBe(0);
    const plain = await rankTurns(counted, query);
    expect(plain.length).toBeGreaterThan(0);
    expect(reads).toBeGreaterThan(0);
    const tomatoes = (hit: { message: { content: unknown } }) => String(hit.message.content).includes("tomatoes");
    expect(await rankTurns(counted, { ...query, unlessNone: tomatoes })).toEqual(plain);
    await store.close();
  });
});
