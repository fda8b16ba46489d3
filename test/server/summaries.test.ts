/**
 * Summaries on the server: a 200-turn session through the HTTP API with a summarizer on the fake
 * upstream, compacting in the background as `threadkeep serve` does. The model gets a summary plus
 * everything after it on every turn, tokens per turn stay flat, and a failing summarizer costs no
 * turn: the server says what was left out, and catches up once summaries work again.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { TokenCounter } from "../../src/core/context/tokens.js";
import type { Memory } from "../../src/core/memory/memory.js";
import { createMemory } from "../../src/create-memory.js";
import type { ChatMessage } from "../../src/core/types.js";
import { createSummarizer, DEFAULT_SUMMARY_INSTRUCTIONS } from "../../src/llm/summarizer.js";
import { createServer, type ThreadkeepServer } from "../../src/server/index.js";
import { createSqliteStore } from "../../src/stores/sqlite/index.js";
import { type FakeUpstream, startFakeUpstream } from "../_fake-upstream.js";

let fake: FakeUpstream;
let memory: Memory;
let server: ThreadkeepServer;
let url: string;
let summariesFail = false;
const isSummaryRequest = (body: any) => body?.messages?.[0]?.content === DEFAULT_SUMMARY_INSTRUCTIONS;

beforeAll(async () => {
  fake = await startFakeUpstream();
  fake.setReply((body) => {
    if (!isSummaryRequest(body)) return {};
    if (summariesFail) return { status: 500, error: { message: "summary model down" } };
    const through = /New messages \d+–(\d+)/.exec(body.messages[1].content)?.[1];
    return { content: `The user asked numbered questions up to message ${through}.` };
  });
  memory = createMemory({
    store: createSqliteStore({ path: ":memory:" }),
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

/** One turn; waits for the background compaction it started, so each turn sees the last one's summary. */
async function turn(sessionId: string, text: string) {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-session-id": sessionId },
    body: JSON.stringify({ model: "chat-model", messages: [{ role: "user", content: text }] }),
  });
  expect(res.status).toBe(200);
  await res.json();
  await memory.idle();
  return {
    warning: res.headers.get("x-threadkeep-warning"),
    sent: fake
      .chatRequests()
      .filter((r) => !isSummaryRequest(r.body))
      .at(-1)!.body.messages as ChatMessage[],
  };
}

const counter = new TokenCounter("o200k_base");
const tokens = (messages: ChatMessage[]) => messages.reduce((sum, m) => sum + counter.message(m), 0);
const question = (i: number) => `Question ${i}: what do you make of topic number ${i} and its details?`;

describe("summaries on the server", () => {
  it("sends a summary plus everything after it on each of 200 turns, with flat tokens per turn", async () => {
    const id = crypto.randomUUID();
    const perTurn: number[] = [];
    for (let i = 1; i <= 200; i++) {
      const { warning, sent } = await turn(id, question(i));
      expect(warning, `turn ${i}`).toBeNull();
      perTurn.push(tokens(sent));
      const summary = sent.find((m) => m.role === "system" && String(m.content).startsWith("Summary of the earlier"));
      const history = sent.filter((m) => m.role !== "system");
      if (i <= 20) {
        // Nothing has left the window yet: the whole conversation goes.
        expect(history).toHaveLength(2 * i - 1);
        continue;
      }
      if (!summary) {
        // The first summary is due once more than the threshold has left the window: until then, all of it.
        expect(history).toHaveLength(2 * i - 1);
        continue;
      }
      // The summary covers messages 1..N; the history sent starts right after N, up to the new question.
      const through = Number(/messages 1–(\d+)/.exec(String(summary.content))?.[1]);
      expect(history[0].content, `turn ${i}`).toBe(question(through / 2 + 1));
      expect(history.at(-1)!.content).toBe(question(i));
      expect(history.length).toBeLessThanOrEqual(20 + 22 + 1);
    }
    const band = (from: number, to: number) => perTurn.slice(from, to);
    const late = Math.max(...band(150, 200));
    const middle = Math.max(...band(60, 110));
    // Flat: the largest context late in the conversation is no larger than in the middle (±10%).
    expect(late).toBeLessThanOrEqual(middle * 1.1);
    expect(Math.min(...band(60, 200))).toBeGreaterThan(0);
    const summaries = await memory.listSummaries(id);
    expect(summaries.at(-1)!.toSeq).toBeGreaterThan(340);
  });

  it("keeps answering while summaries fail, says what was left out, and catches up later", async () => {
    const id = crypto.randomUUID();
    summariesFail = true;
    const logged = vi.spyOn(console, "warn").mockImplementation(() => {});
    const warnings: (string | null)[] = [];
    try {
      for (let i = 1; i <= 30; i++) warnings.push((await turn(id, question(i))).warning);
    } finally {
      summariesFail = false;
    }
    expect(
      logged.mock.calls.some(([line]) => /summarizing session .* failed, its messages are kept/.test(String(line))),
    ).toBe(true);
    logged.mockRestore();
    // 20 + 22 messages reach back; past that, older turns go without a summary, and the header says so.
    expect(warnings.slice(0, 21).every((w) => w === null)).toBe(true);
    expect(warnings.at(-1)).toBe("history-omitted");
    const context = (await (await fetch(`${url}/v1/sessions/${id}/context`)).json()) as any;
    expect(context.warnings).toEqual(["history-omitted"]);
    expect(context.omitted.unsummarized).toBeGreaterThan(0);
    expect(await memory.listSummaries(id)).toEqual([]);
    expect(await memory.getMessages(id)).toHaveLength(60);
    // The next turn retries the summary; it succeeds and nothing is left out any more.
    const after = await turn(id, question(31));
    expect(after.warning).toBe("history-omitted");
    expect(await memory.listSummaries(id)).toHaveLength(1);
    expect((await turn(id, question(32))).warning).toBeNull();
  });
});
