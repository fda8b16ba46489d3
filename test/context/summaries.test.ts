import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createMemory } from "../../src/create-memory.js";
import type { MessageInput } from "../../src/core/types.js";
import { createSummarizer } from "../../src/llm/summarizer.js";
import { createMemoryStore } from "../../src/stores/in-process/index.js";
import { type FakeUpstream, startFakeUpstream } from "../_fake-upstream.js";

let upstream: FakeUpstream;
beforeAll(async () => {
  upstream = await startFakeUpstream();
});
afterAll(() => upstream.close());

const turns = (from: number, to: number): MessageInput[] =>
  Array.from({ length: to - from + 1 }, (_, i) => ({
    role: i % 2 === 0 ? "user" : "assistant",
    content: `message ${from + i}${from + i === 3 ? " about task 42: buy groceries" : ""}`,
  }));

function memoryWith(options: { maxMessages?: number; threshold?: number } = {}) {
  const summarizer = createSummarizer({
    baseUrl: upstream.url,
    apiKey: "sk-test",
    model: "summary-model",
    maxTokens: 300,
  });
  return createMemory({
    store: createMemoryStore({ ttlMs: 0 }),
    summarizer,
    window: 10,
    maxMessages: options.maxMessages ?? 200,
    compaction: { threshold: options.threshold ?? 5 },
  });
}

describe("summaries with an OpenAI-compatible summarizer", () => {
  it("asks the model to summarise the oldest range outside the window, and the summary reaches the context", async () => {
    upstream.requests.length = 0;
    upstream.setReply(() => ({ content: "The user asked to buy groceries (task 42)." }));
    const memory = memoryWith();
    const chat = await memory.startSession();
    await chat.addMessages(turns(1, 15)); // 5 outside the window of 10: not more than the threshold yet
    expect(upstream.chatRequests()).toHaveLength(0);
    await chat.addMessage(turns(16, 16)[0]);

    const [request] = upstream.chatRequests();
    expect(request.headers.authorization).toBe("Bearer sk-test");
    expect(request.body).toMatchObject({ model: "summary-model", max_tokens: 300, stream: false });
    expect(request.body.messages[0].role).toBe("system");
    const transcript: string = request.body.messages[1].content;
    expect(transcript).toContain("New messages 1–6:");
    expect(transcript).toContain("[3] user: message 3 about task 42: buy groceries");
    expect(transcript).not.toContain("message 7");

    const [summary] = await memory.listSummaries(chat.id);
    expect(summary).toMatchObject({
      fromSeq: 1,
      toSeq: 6,
      content: "The user asked to buy groceries (task 42).",
    });
    const context = await chat.context({ input: [{ role: "user", content: "what was that task?" }] });
    expect(context.messages[0]).toEqual({
      role: "system",
      content: "Summary of the earlier conversation (messages 1–6):\nThe user asked to buy groceries (task 42).",
    });
    expect(context.includedSeqs).toEqual(Array.from({ length: 10 }, (_, i) => 7 + i));
    expect(context.includedSummaryIds).toEqual([summary.id]);
    await memory.close();
  });

  it("rolls the previous summary into the next one", async () => {
    upstream.requests.length = 0;
    let made = 0;
    upstream.setReply(() => ({ content: `summary ${++made}` }));
    const memory = memoryWith();
    const chat = await memory.startSession();
    await chat.addMessages(turns(1, 16));
    await chat.addMessages(turns(17, 22));
    const second = upstream.chatRequests()[1].body.messages[1].content;
    expect(second).toContain("Previous summary (messages 1–6):\nsummary 1");
    expect(second).toContain("New messages 7–12:");
    const summaries = await memory.listSummaries(chat.id);
    expect(summaries.map((s) => [s.fromSeq, s.toSeq])).toEqual([
      [1, 6],
      [1, 12],
    ]);
    const context = await chat.context();
    expect(context.includedSummaryIds).toEqual([summaries[1].id]);
    expect(context.messages[0].content).toContain("summary 2");
    await memory.close();
  });

  it("caps only what a summary covers, and a failed summary loses nothing", async () => {
    const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
    upstream.setReply(() => ({ status: 500, error: { message: "model overloaded" } }));
    const memory = memoryWith({ maxMessages: 20, threshold: 100 });
    const chat = await memory.startSession();
    await chat.addMessages(turns(1, 25)); // over the cap, but nothing is summarised
    expect(await chat.getMessages()).toHaveLength(25);
    expect(warn).toHaveBeenCalledWith(expect.stringContaining("its messages are kept"));

    upstream.setReply(() => ({ content: "recovered summary" }));
    await chat.addMessage({ role: "user", content: "message 26" });
    const kept = await chat.getMessages();
    expect(kept).toHaveLength(20);
    expect(kept[0].seq).toBe(7);
    const [summary] = await memory.listSummaries(chat.id);
    expect(summary).toMatchObject({ fromSeq: 1, content: "recovered summary" });
    expect(summary.toSeq).toBeGreaterThanOrEqual(6);
    warn.mockRestore();
    await memory.close();
  });

  it("without a summarizer summarises nothing and the cap drops the oldest", async () => {
    upstream.requests.length = 0;
    const memory = createMemory({ store: createMemoryStore({ ttlMs: 0 }), maxMessages: 10 });
    const chat = await memory.startSession();
    await chat.addMessages(turns(1, 15));
    expect((await chat.getMessages()).map((m) => m.seq)).toEqual(Array.from({ length: 10 }, (_, i) => 6 + i));
    expect(await memory.compact(chat.id)).toEqual({ dropped: 0 });
    expect(upstream.requests).toHaveLength(0);
    await memory.close();
  });

  it("can summarise in the background, after the append returned", async () => {
    upstream.setReply(() => ({ content: "later", delayMs: 50 }));
    const summarizer = createSummarizer({ baseUrl: upstream.url, model: "m" });
    const memory = createMemory({
      store: createMemoryStore({ ttlMs: 0 }),
      summarizer,
      window: 4,
      compaction: { threshold: 1, background: true },
    });
    const chat = await memory.startSession();
    await chat.addMessages(turns(1, 8));
    expect(await memory.listSummaries(chat.id)).toEqual([]);
    await memory.close(); // waits for the running compaction
    expect(upstream.chatRequests().at(-1)?.body.model).toBe("m");
  });
});
