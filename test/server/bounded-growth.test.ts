/**
 * Bounded growth through the server: with `maxMessages` 20 and a summary model that always fails, a
 * session never holds more than the ceiling (`compaction.hardCap`, by default twice the cap), and the
 * turns whose context lacks what the ceiling dropped say so with `history-omitted`. Before, the cap
 * dropped only summarised messages, and 150 such turns left all 300 messages stored.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { Memory } from "../../src/core/memory/memory.js";
import { createMemory } from "../../src/create-memory.js";
import { createSummarizer, DEFAULT_SUMMARY_INSTRUCTIONS } from "../../src/llm/summarizer.js";
import { createServer, type ThreadkeepServer } from "../../src/server/index.js";
import { createSqliteStore } from "../../src/stores/sqlite/index.js";
import { type FakeUpstream, startFakeUpstream } from "../_fake-upstream.js";

let fake: FakeUpstream;
let memory: Memory;
let server: ThreadkeepServer;
let url: string;
const isSummaryRequest = (body: any) => body?.messages?.[0]?.content === DEFAULT_SUMMARY_INSTRUCTIONS;

beforeAll(async () => {
  fake = await startFakeUpstream();
  fake.setReply((body) => (isSummaryRequest(body) ? { status: 500, error: { message: "summary model down" } } : {}));
  memory = createMemory({
    store: createSqliteStore({ path: ":memory:" }),
    maxMessages: 20,
    summarizer: createSummarizer({ baseUrl: fake.url }),
    compaction: { background: true },
  });
  server = await createServer({ memory, upstream: fake.url, port: 0 });
  url = await server.listen();
});
afterAll(async () => {
  await server?.close();
  await memory?.close();
  await fake?.close();
});

async function turn(sessionId: string, text: string): Promise<string | null> {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-session-id": sessionId },
    body: JSON.stringify({ model: "chat-model", messages: [{ role: "user", content: text }] }),
  });
  expect(res.status).toBe(200);
  await res.json();
  await memory.idle();
  return res.headers.get("x-threadkeep-warning");
}

describe("bounded growth with a summarizer that always fails", () => {
  it("keeps at most twice the cap through 150 turns, and the turns that lack what was dropped say so", async () => {
    const id = crypto.randomUUID();
    const logged = vi.spyOn(console, "warn").mockImplementation(() => {});
    const warnings: (string | null)[] = [];
    let most = 0;
    let failures: number;
    try {
      for (let i = 1; i <= 150; i++) {
        warnings.push(await turn(id, `question ${i}`));
        most = Math.max(most, (await memory.getMessages(id)).length);
      }
      failures = logged.mock.calls.filter(([line]) => /summarizing session .* failed/.test(String(line))).length;
    } finally {
      logged.mockRestore();
    }
    // The summarizer was asked and failed (logged, never thrown at a turn).
    expect(failures).toBeGreaterThan(0);
    expect(fake.chatRequests().some((r) => isSummaryRequest(r.body))).toBe(true);
    expect(await memory.listSummaries(id)).toEqual([]);
    expect(most).toBe(40);
    const stored = await memory.getMessages(id);
    expect(stored).toHaveLength(40);
    // The newest 40: turns 131..150, each a question and its answer.
    expect(stored[0].content).toBe("question 131");
    expect(stored.at(-1)!.content).toBe("echo: question 150");
    // The first 20 turns hold everything (40 messages at most); from the turn after the first drop on,
    // every turn's context lacks the oldest and the header says so.
    expect(warnings.slice(0, 20).every((w) => w === null)).toBe(true);
    expect(warnings.slice(21).every((w) => w === "history-omitted")).toBe(true);
    const context = (await (await fetch(`${url}/v1/sessions/${id}/context`)).json()) as any;
    expect(context.warnings).toEqual(["history-omitted"]);
    expect(context.omitted.unsummarized).toBeGreaterThan(0);
  });
});
