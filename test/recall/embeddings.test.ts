/**
 * Semantic and hybrid search, background embedding, reindex and recall, against the fake
 * OpenAI-compatible embeddings endpoint on 127.0.0.1, whose vectors put synonyms close together
 * ("automobile" near "car"), so rankings are checked for real.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { Memory } from "../../src/core/memory/memory.js";
import { createMemory } from "../../src/create-memory.js";
import type { SearchMode } from "../../src/core/search.js";
import { createEmbedder } from "../../src/llm/embedder.js";
import { createMemoryStore } from "../../src/stores/in-process/index.js";
import { createSqliteStore } from "../../src/stores/sqlite/index.js";
import { type FakeUpstream, startFakeUpstream } from "../_fake-upstream.js";

let fake: FakeUpstream;
const memories: Memory[] = [];
beforeAll(async () => {
  fake = await startFakeUpstream();
});
afterAll(async () => {
  for (const m of memories) await m.close();
  await fake.close();
});

const open = (
  store = createSqliteStore({ path: ":memory:" }),
  extra: Parameters<typeof createMemory>[0] extends infer O ? Partial<O> : never = {},
) => {
  const memory = createMemory({
    store,
    embedder: createEmbedder({ baseUrl: fake.url, model: "fake-embed" }),
    embedding: { retryDelayMs: 60_000 },
    ...extra,
  });
  memories.push(memory);
  return memory;
};
const user = (content: string) => ({ role: "user" as const, content });

// A labelled set: each query has one right answer; some need the meaning, some the exact word.
const DOCS = [
  "My car makes a strange noise when braking",
  "Remember to buy groceries: milk and bread",
  "The vet said the puppy is healthy",
  "Invoice INV-4471 is due on Friday",
  "Our flight to Lisbon leaves from gate B12",
  "Reservation code QX7Z for the restaurant",
  "The piano lesson moved to Tuesday",
  "Forecast says a storm is coming tomorrow",
];
const QUESTIONS: [query: string, answer: number][] = [
  ["automobile", 0],
  ["supermarket", 1],
  ["kitten", 2],
  ["INV-4471", 3],
  ["gate B12", 4],
  ["QX7Z", 5],
  ["music", 6],
  ["umbrella weather", 7],
  ["braking noise", 0],
  ["Lisbon airport", 4],
];

describe("semantic and hybrid search", () => {
  it("finds the car message for 'automobile', and never another owner's", async () => {
    const memory = open();
    const mine = await memory.startSession({ userId: "alice" });
    const theirs = await memory.startSession({ userId: "bob" });
    await memory.addMessages(mine.id, [user("I parked the car downtown"), user("Remember the groceries")], {
      userId: "alice",
    });
    await memory.addMessages(theirs.id, [user("bob's car is red")], { userId: "bob" });
    await memory.idle();
    expect(await memory.search("automobile", { userId: "alice", mode: "substring" })).toEqual([]);
    const hits = await memory.search("automobile", { userId: "alice", mode: "semantic", limit: 5 });
    expect(hits[0].message.content).toBe("I parked the car downtown");
    expect(hits.every((h) => h.sessionId === mine.id)).toBe(true);
    expect(hits[0].score).toBeGreaterThan(hits[1].score!);
    const bobs = await memory.search("automobile", { userId: "bob", mode: "hybrid" });
    expect(bobs.map((h) => h.message.content)).toEqual(["bob's car is red"]);
  });

  it("ranks the labelled set better with hybrid than with full text or semantic alone", async () => {
    const memory = open();
    const session = await memory.startSession({ userId: "carol" });
    await memory.addMessages(session.id, DOCS.map(user), { userId: "carol" });
    await memory.idle();
    const mrr = async (mode: SearchMode) => {
      let sum = 0;
      for (const [query, answer] of QUESTIONS) {
        const hits = await memory.search(query, { userId: "carol", mode, limit: 5 });
        const rank = hits.findIndex((h) => h.seq === answer + 1);
        sum += rank < 0 ? 0 : 1 / (rank + 1);
      }
      return sum / QUESTIONS.length;
    };
    const [fulltext, semantic, hybrid] = [await mrr("fulltext"), await mrr("semantic"), await mrr("hybrid")];
    expect(hybrid).toBeGreaterThan(fulltext);
    expect(hybrid).toBeGreaterThan(semantic);
    expect(hybrid).toBeGreaterThanOrEqual(0.9);
  });

  it("stores messages while embeddings are down, and reindex fills them in", async () => {
    const memory = open(createMemoryStore());
    const session = await memory.startSession({ userId: "dave" });
    const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
    fake.setEmbeddingsDown(true);
    try {
      const stored = await memory.addMessages(session.id, [user("The mechanic fixed my truck")], { userId: "dave" });
      expect(stored).toHaveLength(1);
      await memory.idle();
    } finally {
      fake.setEmbeddingsDown(false);
    }
    expect(warn.mock.calls.some(([line]) => /embedding session .* failed, retrying/.test(String(line)))).toBe(true);
    warn.mockRestore();
    expect(await memory.getMessages(session.id, { userId: "dave" })).toHaveLength(1);
    expect(await memory.search("automobile", { userId: "dave", mode: "semantic" })).toEqual([]);
    const progress: number[] = [];
    const result = await memory.reindex((done) => progress.push(done));
    expect(result.embedded).toBeGreaterThanOrEqual(1);
    expect(progress.length).toBeGreaterThanOrEqual(1);
    const hits = await memory.search("automobile", { userId: "dave", mode: "semantic" });
    expect(hits.map((h) => h.message.content)).toEqual(["The mechanic fixed my truck"]);
  });

  it("re-embeds under a new model name, and refuses a model whose dimensions differ", async () => {
    const store = createMemoryStore();
    const first = open(store);
    const session = await first.startSession({ userId: "erin" });
    await first.addMessages(session.id, [user("a car"), user("a song")], { userId: "erin" });
    await first.idle();
    const renamed = open(store, { embedder: createEmbedder({ baseUrl: fake.url, model: "fake-embed-v2" }) });
    expect(await renamed.search("automobile", { userId: "erin", mode: "semantic" })).toEqual([]);
    expect((await renamed.reindex()).embedded).toBe(2);
    expect(
      (await renamed.search("automobile", { userId: "erin", mode: "semantic", limit: 1 }))[0].message.content,
    ).toBe("a car");
    // Same name, other dimensions: refused clearly, and the messages are still stored.
    const shorter = open(store, {
      embedder: { model: "fake-embed", embed: async (texts) => texts.map(() => [1, 0, 0]) },
    });
    const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
    await shorter.addMessages(session.id, [user("a third")], { userId: "erin" });
    await shorter.idle();
    warn.mockRestore();
    await expect(shorter.reindex()).rejects.toMatchObject({ code: "embedding_dimension_mismatch" });
    expect(await shorter.getMessages(session.id, { userId: "erin" })).toHaveLength(3);
  });
});

describe("recall into context", () => {
  const filler = (i: number) => [
    user(`Small talk number ${i} about nothing much`),
    { role: "assistant" as const, content: `Reply ${i}` },
  ];

  it("brings back the older message related to the question, marked, and reports why", async () => {
    const memory = open(createSqliteStore({ path: ":memory:" }), { window: 10 });
    const session = await memory.startSession({ userId: "frank" });
    await memory.addMessages(
      session.id,
      [
        user("My car is a blue Volvo from 2012"),
        { role: "assistant", content: "Noted." },
        ...Array.from({ length: 15 }, (_, i) => filler(i)).flat(),
      ],
      { userId: "frank" },
    );
    await memory.idle();
    const context = await memory.buildContext(session.id, {
      userId: "frank",
      input: [user("Which automobile do I drive?")],
    });
    expect(context.includedSeqs).toContain(1);
    expect(context.recalled?.map((r) => r.seq)).toEqual([1]);
    expect(context.recalled?.[0].query).toBe("Which automobile do I drive?");
    expect(
      context.messages.some((m) => m.role === "system" && String(m.content).startsWith("Recalled from earlier")),
    ).toBe(true);
    expect(context.messages.some((m) => m.content === "My car is a blue Volvo from 2012")).toBe(true);
    // A topic the model asked for is recalled instead of the question's.
    await memory.setPreferences(session.id, { recallTopic: "car" }, { userId: "frank" });
    const topical = await memory.buildContext(session.id, { userId: "frank", input: [user("Anything else?")] });
    expect(topical.recalled?.map((r) => [r.seq, r.query])).toEqual([[1, "car"]]);
    // Off by a setting.
    const off = open((await memory.store()) as never, { window: 10, recall: { enabled: false } });
    const plain = await off.buildContext(session.id, {
      userId: "frank",
      input: [user("Which automobile do I drive?")],
    });
    expect(plain.includedSeqs).not.toContain(1);
    expect(plain.recalled).toBeUndefined();
  });
});
