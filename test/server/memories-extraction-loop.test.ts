/**
 * Memory extraction (`--memories auto`) at the largest it reads: a turn of 12 messages of 2,000
 * characters, a user with 1,000 memories of 300 characters (all listed, the 20 most related picked
 * lexically for the prompt), an answer of 10 operations applied. It runs beside everyone else's requests,
 * so it must leave the event loop free within the 250 ms at any time (issue 34; 150 here). The model answers in a later
 * task, as over the network; the store is SQLite (synchronous: its work is on this thread).
 */
import type { FastifyBaseLogger } from "fastify";
import { describe, expect, it } from "vitest";
import { createMemory } from "../../src/create-memory.js";
import { newSessionId } from "../../src/core/ids.js";
import type { Upstream } from "../../src/llm/openai-compatible.js";
import { MemoryExtractor } from "../../src/server/user-memories/extractor.js";
import { ServerMetrics } from "../../src/server/metrics.js";
import { createSqliteStore } from "../../src/stores/sqlite/index.js";
import { withinLoopBound } from "../_event-loop-gaps.js";
import { sqliteTempFiles } from "../stores/_sqlite-files.js";

const { freshPath } = sqliteTempFiles("threadkeep-extraction-loop-");
const MEMORIES = 1000;
/**
 * Tighter than the 250 ms, so the test tells: the prompt's choice of related memories held the
 * loop 232–277 ms before the query's prefixes were made once (load 19–22 on 2 cores), 40 ms after.
 */
const BOUND_MS = 150;

const words = (n: number, seed: number) =>
  Array.from({ length: n }, (_, i) => `word${(seed * 7919 + i * 104_729) % 5000}`).join(" ");

describe("memory extraction and the event loop", () => {
  it("extracting from a full turn against 1,000 memories holds the loop at most 150 ms", async () => {
    const store = createSqliteStore({ path: freshPath(), backgroundCheckpoints: false });
    const memory = createMemory({ store });
    const answer = {
      operations: Array.from({ length: 10 }, (_, i) => ({ op: "add", text: `fact ${i}: ${words(20, i)}` })),
    };
    let asked = 0;
    const upstream = {
      chat: async () => {
        asked++;
        await new Promise((resolve) => setImmediate(resolve));
        return { choices: [{ message: { content: JSON.stringify(answer) } }] };
      },
    } as unknown as Upstream;
    const quiet = { warn() {}, info() {}, error() {}, debug() {}, child: () => quiet } as unknown as FastifyBaseLogger;
    const extractor = new MemoryExtractor({ memory, upstream, metrics: new ServerMetrics(), log: quiet });
    try {
      const sessionId = newSessionId();
      await store.createSession({ id: sessionId, userId: "u" });
      await store.appendMessages(
        sessionId,
        Array.from({ length: 12 }, (_, i) => ({
          role: i % 2 ? ("assistant" as const) : ("user" as const),
          content: words(250, i).slice(0, 2000),
        })),
      );
      for (let i = 0; i < MEMORIES; i++)
        await store.addUserMemory({ userId: "u", text: words(40, 100 + i).slice(0, 300) });

      const extracted = await withinLoopBound("extracting memories", BOUND_MS, () => extractor.extract("u", sessionId));
      expect(extracted.value).toBe("applied");
      expect(asked).toBe(1);
      expect(
        (await store.listUserMemories("u", { limit: 20 })).memories.filter((m) => m.text.startsWith("fact ")).length,
      ).toBe(10);
      console.log(
        `[loop] memory extraction against ${MEMORIES} memories: longest hold ${Math.round(extracted.longestMs)} ms`,
      );
    } finally {
      await extractor.close();
      await memory.close();
    }
  }, 60_000);
});
