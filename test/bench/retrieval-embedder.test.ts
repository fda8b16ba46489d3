/**
 * The retrieval benchmark's embedder options (bench/_retrieval-embedder.ts): what the arguments and
 * environment choose, and the fake embedder path end to end in process (the fake upstream on
 * 127.0.0.1, recall mode on a tiny sample written here, never LoCoMo's data).
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { embedderChoice, FAKE_EMBEDDING_MODEL, openBenchEmbedder } from "../../bench/_retrieval-embedder.js";
import { readLocomo } from "../../bench/_locomo.js";
import { recallMode } from "../../bench/_retrieval-recall.js";
import { createMemory } from "../../src/create-memory.js";
import { createMemoryStore } from "../../src/stores/in-process/index.js";
import { fakeEmbedding, startFakeUpstream } from "../_fake-upstream.js";

describe("choosing the embedder", () => {
  it("is none without options or environment", () => {
    expect(embedderChoice({}, {})).toEqual({ kind: "none" });
    expect(embedderChoice({ "fake-embedder": false }, { THREADKEEP_EMBEDDING_URL: "" })).toEqual({ kind: "none" });
  });

  it("takes a URL and a model from the options, or from the environment `threadkeep serve` reads, the key only from it", () => {
    expect(
      embedderChoice(
        { "embedding-url": "http://127.0.0.1:11434/v1/", "embedding-model": "nomic-embed-text" },
        { THREADKEEP_EMBEDDING_API_KEY: "sk-x" },
      ),
    ).toEqual({ kind: "endpoint", url: "http://127.0.0.1:11434/v1", model: "nomic-embed-text", apiKey: "sk-x" });
    expect(
      embedderChoice(
        { "embedding-model": "m2" },
        { THREADKEEP_EMBEDDING_URL: "http://127.0.0.1:9/v1", THREADKEEP_EMBEDDING_MODEL: "m1" },
      ),
    ).toEqual({ kind: "endpoint", url: "http://127.0.0.1:9/v1", model: "m2", apiKey: undefined });
  });

  it("refuses half an endpoint, a URL that is not http, and the fake beside an endpoint", () => {
    expect(() => embedderChoice({ "embedding-url": "http://127.0.0.1:9/v1" }, {})).toThrow(/--embedding-model/);
    expect(() => embedderChoice({}, { THREADKEEP_EMBEDDING_MODEL: "m" })).toThrow(/--embedding-url/);
    expect(() => embedderChoice({ "embedding-url": "127.0.0.1:9", "embedding-model": "m" }, {})).toThrow(/http/);
    expect(() => embedderChoice({ "fake-embedder": true, "embedding-model": "m" }, {})).toThrow(/pick one/);
    // The environment does not conflict with --fake-embedder: the option wins.
    expect(embedderChoice({ "fake-embedder": true }, { THREADKEEP_EMBEDDING_MODEL: "m" })).toEqual({ kind: "fake" });
  });
});

describe("the fake embedder", () => {
  afterEach(() => vi.restoreAllMocks());

  it("embeds through the fake upstream as the test suite's fake embedding does, until closed", async () => {
    const opened = await openBenchEmbedder({ kind: "fake" });
    try {
      expect(opened.embedder?.model).toBe(FAKE_EMBEDDING_MODEL);
      expect(opened.label).toMatch(/^fake \(test\/_fake-upstream\.ts at http:\/\/127\.0\.0\.1:\d+\/v1/);
      expect(await opened.embedder!.embed(["my automobile broke", "a puppy"])).toEqual([
        fakeEmbedding("my automobile broke"),
        fakeEmbedding("a puppy"),
      ]);
    } finally {
      await opened.close();
    }
    await expect(opened.embedder!.embed(["x"])).rejects.toThrow();
  });

  it("reaches a user's endpoint with the model named and the key from the environment", async () => {
    const upstream = await startFakeUpstream();
    try {
      const choice = embedderChoice(
        { "embedding-url": upstream.url, "embedding-model": "nomic-embed-text" },
        { THREADKEEP_EMBEDDING_API_KEY: "sk-bench" },
      );
      const opened = await openBenchEmbedder(choice);
      expect(opened.label).toBe(`nomic-embed-text at ${upstream.url}`);
      expect(await opened.embedder!.embed(["a puppy"])).toEqual([fakeEmbedding("a puppy")]);
      await opened.close();
      const [request] = upstream.embeddingRequests();
      expect(request.body.model).toBe("nomic-embed-text");
      expect(request.headers.authorization).toBe("Bearer sk-bench");
    } finally {
      await upstream.close();
    }
  });

  it("runs recall mode with it, and the same share without it in the same run", async () => {
    const { conversations } = readLocomo([
      {
        sample_id: "t1",
        conversation: {
          speaker_a: "Ann",
          speaker_b: "Bob",
          session_1: [
            { speaker: "Ann", dia_id: "D1:1", text: "My automobile broke down on the highway near Denver." },
            { speaker: "Bob", dia_id: "D1:2", text: "Did a mechanic fix it?" },
          ],
          session_2: [{ speaker: "Bob", dia_id: "D2:1", text: "I adopted a beagle puppy named Rex." }],
        },
        qa: [{ question: "Where did Ann's automobile break down?", evidence: ["D1:1"], category: 4 }],
      },
    ]);
    const store = createMemoryStore();
    const opened = await openBenchEmbedder({ kind: "fake" });
    const memory = createMemory({ store, ttlMs: 0, embedder: opened.embedder });
    const lines: string[] = [];
    vi.spyOn(console, "log").mockImplementation((line: unknown) => void lines.push(String(line)));
    vi.spyOn(console, "error").mockImplementation(() => {});
    try {
      const userId = "bench-user";
      for (const session of conversations[0].sessions) {
        const { id } = await memory.startSession({ userId });
        await memory.addMessages(
          id,
          session.turns.map(({ role, content }) => ({ role, content })),
          { userId },
        );
      }
      await memory.idle();
      expect((await memory.reindex()).embedded).toBe(0); // embedded in the background already
      const texts = new Map(conversations[0].sessions.flatMap((s) => s.turns.map((t) => [t.id, t.content] as const)));
      await recallMode(
        { store, ttlMs: 0, embedder: opened.embedder },
        [{ conversation: conversations[0], userId, texts }],
        {
          shares: [10],
          dateShare: 10,
          dataName: "tiny.json",
          store: "memory",
        },
      );
    } finally {
      await memory.close();
      await opened.close();
    }
    const output = lines.join("\n");
    expect(output).toContain(`embedder ${FAKE_EMBEDDING_MODEL}`);
    const row = (label: string) =>
      output
        .split("\n")
        .find((l) => l.startsWith(`| ${label} `))
        ?.split("|")[3]
        ?.trim();
    expect(row("10%")).toBe("100.0%");
    expect(row("10%, no embedder")).toBe("100.0%");
  });
});
