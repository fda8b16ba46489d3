/**
 * Memories ranked by words and meaning (hybrid) with an embedder, by words alone without: the listing
 * with `q` and the memory note of a turn when the memories do not all fit. The embedder is the fake
 * OpenAI-compatible endpoint on 127.0.0.1, whose vectors put synonyms close ("sedan" near "vehicle"),
 * so a memory that shares no word with the question can be found by its meaning.
 */
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { Memory } from "../../src/core/memory/memory.js";
import { canStoreMemoryVectors } from "../../src/core/types.js";
import { createMemory } from "../../src/create-memory.js";
import { createEmbedder } from "../../src/llm/embedder.js";
import { createMemoryStore } from "../../src/stores/in-process/index.js";
import { createSqliteStore } from "../../src/stores/sqlite/index.js";
import { type FakeUpstream, fakeEmbedding, startFakeUpstream } from "../_fake-upstream.js";
import { startStack } from "../server/_stack.js";

let fake: FakeUpstream;
const opened: Memory[] = [];
beforeAll(async () => {
  fake = await startFakeUpstream();
});
afterAll(async () => {
  for (const m of opened) await m.close();
  await fake.close();
});

const stores = [
  ["memory", () => createMemoryStore()],
  ["sqlite", () => createSqliteStore({ path: ":memory:" })],
] as const;

describe.each(stores)("memories ranked with an embedder (%s store)", (_name, makeStore) => {
  /** The same store with and without an embedder. */
  function open() {
    const store = makeStore();
    const withEmbedder = createMemory({
      store,
      embedder: createEmbedder({ baseUrl: fake.url, model: "fake-embed" }),
      embedding: { retryDelayMs: 60_000 },
    });
    const lexical = createMemory({ store });
    opened.push(withEmbedder);
    return { store, withEmbedder, lexical };
  }
  const texts = (page: { memories: { text: string }[] }) => page.memories.map((m) => m.text);

  it("lists a memory that shares no word with q but means the same, first, only with the embedder", async () => {
    const { store, withEmbedder, lexical } = open();
    const userId = `user-${randomUUID()}`;
    for (const text of ["Owns a red sedan", "Has a puppy called Rex", "Is vegetarian"])
      await withEmbedder.memories.add({ text }, { userId });
    await withEmbedder.idle();
    expect(canStoreMemoryVectors(store) && (await store.missingUserMemoryEmbeddings(userId, "fake-embed"))).toEqual([]);

    const q = "Which vehicle needs servicing?";
    expect(texts(await withEmbedder.memories.list({ userId, q }))).toEqual(["Owns a red sedan"]);
    expect(texts(await lexical.memories.list({ userId, q }))).toEqual([]);
    // Another user's memories are never candidates, by words or meaning.
    expect(texts(await withEmbedder.memories.list({ userId: `user-${randomUUID()}`, q }))).toEqual([]);
  });

  it("fuses the two rankings: related both ways first, then either way", async () => {
    const { withEmbedder, lexical } = open();
    const userId = `user-${randomUUID()}`;
    // By meaning: sedan (0.92), the car wash (0.85); by words: the car wash (car, get), the haircut (get).
    const wash = "Gets the car washed at the station every single Sunday morning";
    for (const text of ["Owns a red sedan", wash, "Wants to get a haircut", "Is vegetarian"]) {
      await withEmbedder.memories.add({ text }, { userId });
    }
    await withEmbedder.idle();
    const q = "Where should I get my car serviced?";
    expect(texts(await lexical.memories.list({ userId, q }))).toEqual([wash, "Wants to get a haircut"]);
    expect(texts(await withEmbedder.memories.list({ userId, q }))).toEqual([
      wash,
      "Owns a red sedan",
      "Wants to get a haircut",
    ]);
    const first = await withEmbedder.memories.list({ userId, q, limit: 2 });
    expect(texts(first)).toEqual([wash, "Owns a red sedan"]);
    expect(texts(await withEmbedder.memories.list({ userId, q, limit: 2, cursor: first.nextCursor! }))).toEqual([
      "Wants to get a haircut",
    ]);
  });

  it("embeds a changed memory again, and a deleted one is gone", async () => {
    const { withEmbedder } = open();
    const userId = `user-${randomUUID()}`;
    const sedan = await withEmbedder.memories.add({ text: "Owns a red sedan" }, { userId });
    await withEmbedder.idle();
    const q = "Which vehicle needs servicing?";
    expect(texts(await withEmbedder.memories.list({ userId, q }))).toEqual(["Owns a red sedan"]);
    await withEmbedder.memories.update(sedan.id, { text: "Plays the guitar" }, { userId });
    await withEmbedder.idle();
    expect(texts(await withEmbedder.memories.list({ userId, q }))).toEqual([]);
    expect(texts(await withEmbedder.memories.list({ userId, q: "Any music plans?" }))).toEqual(["Plays the guitar"]);
    await withEmbedder.memories.delete(sedan.id, { userId });
    expect(texts(await withEmbedder.memories.list({ userId, q: "Any music plans?" }))).toEqual([]);
  });

  it("brings the memory closest in meaning into a turn whose memories do not all fit, only with the embedder", async () => {
    const { store, withEmbedder, lexical } = open();
    const userId = `user-${randomUUID()}`;
    // The oldest memory, sharing no word with the message: without meaning it is ranked last.
    const sedan = await store.addUserMemory({ userId, text: "Owns a red sedan", createdAt: 1_000 });
    for (let i = 0; i < 30; i++) {
      await store.addUserMemory({
        userId,
        text: `Collects stamps from country number ${i} and keeps them in album ${i}`,
        createdAt: 2_000 + i,
      });
    }
    await withEmbedder.memories.scheduleEmbedding({ userId });
    await withEmbedder.idle();
    const turn = {
      userId,
      input: [{ role: "user" as const, content: "Which vehicle needs servicing?" }],
      tokenBudget: 2_000,
    };

    const plain = (await lexical.buildContext(randomUUID(), turn)).memories!;
    expect(plain.omitted).toBeGreaterThan(0);
    // Without meaning nothing relates the sedan to the message: it is ranked last, and comes in only
    // as a "recent" filler when its short line fits the room the longer ones left. That room depends
    // on how many tokens each line's random id takes, so the sedan is in some runs and out of others.
    expect(plain.included.filter((m) => m.reason === "related")).toEqual([]);

    const hybrid = (await withEmbedder.buildContext(randomUUID(), turn)).memories!;
    expect(hybrid.tokens).toBeLessThanOrEqual(hybrid.budget);
    expect(hybrid.included.find((m) => m.id === sedan.id)).toMatchObject({ reason: "related" });
    expect(hybrid.included.filter((m) => m.reason === "related").map((m) => m.id)).toEqual([sedan.id]);
  });

  it("ranks by words alone when the embedder fails, and says so", async () => {
    const { withEmbedder } = open();
    const userId = `user-${randomUUID()}`;
    for (const text of ["Owns a red sedan", "Gets the car washed every Sunday"])
      await withEmbedder.memories.add({ text }, { userId });
    await withEmbedder.idle();
    const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
    fake.setEmbeddingsDown(true);
    try {
      expect(
        texts(await withEmbedder.memories.list({ userId, q: "Is my car clean? (asked while embeddings are down)" })),
      ).toEqual(["Gets the car washed every Sunday"]);
      expect(warn.mock.calls.map((c) => String(c[0])).join("\n")).toMatch(/ranked by words only/);
    } finally {
      fake.setEmbeddingsDown(false);
      warn.mockRestore();
    }
  });
});

describe("GET /v1/memories?q= with --embedding-model", () => {
  it("ranks the caller's memories hybrid, and another user's never", async () => {
    const embedder = { model: "fake-embed", embed: async (texts: string[]) => texts.map(fakeEmbedding) };
    const stack = await startStack({ apiKeys: { "key-ann": "ann", "key-bob": "bob" }, memoryOptions: { embedder } });
    try {
      const add = (key: string, text: string) =>
        stack.request("POST", "/v1/memories", { headers: { authorization: `Bearer ${key}` }, body: { text } });
      for (const text of ["Owns a red sedan", "Wants to get a haircut", "Is vegetarian"])
        expect((await add("key-ann", text)).status).toBe(201);
      expect((await add("key-bob", "Drives a truck")).status).toBe(201);
      await stack.memory.idle();
      const res = await stack.request("GET", `/v1/memories?q=${encodeURIComponent("Which vehicle needs servicing?")}`, {
        headers: { authorization: "Bearer key-ann" },
      });
      expect(res.status).toBe(200);
      const body = (await res.json()) as { data: { text: string }[]; has_more: boolean };
      expect(body.data.map((m) => m.text)).toEqual(["Owns a red sedan"]);
      expect(body.has_more).toBe(false);
    } finally {
      await stack.close();
    }
  });
});
