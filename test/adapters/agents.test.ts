/**
 * `threadkeep/agents` with the real OpenAI Agents SDK: a Runner whose agent's model is an
 * OpenAIChatCompletionsModel over the `openai` client pointed at the fake upstream, with
 * ThreadkeepSession as its session: two runs, a tool turn, streaming, popItem; items round-trip.
 */
import {
  Agent,
  type AgentInputItem,
  isSessionHistoryTransactionAwareSession,
  OpenAIChatCompletionsModel,
  Runner,
  setTracingDisabled,
  tool,
} from "@openai/agents";
import OpenAI from "openai";
import { beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { ThreadkeepSession } from "../../src/adapters/agents.js";
import { createMemory } from "../../src/create-memory.js";
import { createMemoryStore } from "../../src/stores/in-process/index.js";
import { lastSentTexts, useFakeAndMemory } from "./_setup.js";

const stack = useFakeAndMemory();
let agent: Agent;
const runner = new Runner({ tracingDisabled: true });

beforeAll(async () => {
  setTracingDisabled(true);
  const model = new OpenAIChatCompletionsModel(
    new OpenAI({ baseURL: stack.fake.url, apiKey: "sk-test", maxRetries: 0 }),
    "fake-model",
  );
  const weather = tool({
    name: "get_weather",
    description: "The weather in a city",
    parameters: z.object({ city: z.string() }),
    execute: async ({ city }) => `Sunny in ${city}`,
  });
  agent = new Agent({ name: "Assistant", instructions: "Be terse.", model, tools: [weather] });
});

const session = (sessionId: string, userId = "alice") =>
  new ThreadkeepSession({ memory: stack.memory, sessionId, userId });
const sentTo = () =>
  stack.fake.chatRequests().at(-1)!.body.messages as { role: string; content: unknown; tool_calls?: unknown[] }[];

describe("ThreadkeepSession with the Agents SDK Runner", () => {
  it("remembers the first run in the second", async () => {
    stack.fake.setReply((body) => ({ content: `echo: ${body.messages.at(-1).content}` }));
    const s = session("agents-two-runs");
    const first = await runner.run(agent, "My name is Ada.", { session: s });
    expect(first.finalOutput).toBe("echo: My name is Ada.");
    const second = await runner.run(agent, "What is my name?", { session: s });
    expect(second.finalOutput).toBe("echo: What is my name?");
    expect(lastSentTexts(stack.fake)).toEqual([
      "system: Be terse.",
      "user: My name is Ada.",
      "assistant: echo: My name is Ada.",
      "user: What is my name?",
    ]);
    const stored = await stack.memory.getMessages(await s.getSessionId(), { userId: "alice" });
    expect(stored.map((m) => `${m.role}: ${m.content}`)).toEqual([
      "user: My name is Ada.",
      "assistant: echo: My name is Ada.",
      "user: What is my name?",
      "assistant: echo: What is my name?",
    ]);
  });

  it("keeps a tool turn: the call and its result reach the model as a chat tool exchange", async () => {
    stack.fake.setReply((body) =>
      body.messages.at(-1).role === "tool"
        ? { content: `It is ${body.messages.at(-1).content}.` }
        : {
            tool_calls: [
              { id: "call_w1", type: "function", function: { name: "get_weather", arguments: '{"city":"Utrecht"}' } },
            ],
          },
    );
    const s = session("agents-tool-turn");
    const result = await runner.run(agent, "Weather in Utrecht?", { session: s });
    expect(result.finalOutput).toBe("It is Sunny in Utrecht.");
    stack.fake.setReply(() => ({ content: "Noted." }));
    await runner.run(agent, "Thanks", { session: s });
    const sent = sentTo();
    expect(sent.map((m) => m.role)).toEqual(["system", "user", "assistant", "tool", "assistant", "user"]);
    expect(sent[2].tool_calls).toEqual([
      { id: "call_w1", type: "function", function: { name: "get_weather", arguments: '{"city":"Utrecht"}' } },
    ]);
    expect(sent[3]).toMatchObject({ role: "tool", tool_call_id: "call_w1", content: "Sunny in Utrecht" });
    const items = await s.getItems();
    expect(items.map((i) => i.type)).toEqual([
      "message",
      "function_call",
      "function_call_result",
      "message",
      "message",
      "message",
    ]);
    expect(items[2]).toMatchObject({ type: "function_call_result", callId: "call_w1", name: "get_weather" });
  });

  it("streams a run into the session, and popItem takes back the last item", async () => {
    stack.fake.setReply((body) => ({ content: `streamed: ${body.messages.at(-1).content}` }));
    const s = session("agents-stream");
    const result = await runner.run(agent, "Stream this", { session: s, stream: true });
    let text = "";
    for await (const chunk of result.toTextStream()) text += chunk;
    await result.completed;
    expect(text).toBe("streamed: Stream this");
    expect((await s.getItems()).map((i) => i.type)).toEqual(["message", "message"]);
    const popped = await s.popItem();
    expect(popped).toMatchObject({
      type: "message",
      role: "assistant",
      content: [{ type: "output_text", text: "streamed: Stream this" }],
    });
    expect(await s.getItems()).toEqual([{ type: "message", role: "user", content: "Stream this" }]);
    expect(await s.getItems(0)).toEqual([]);
    await runner.run(agent, "Again", { session: s });
    expect(lastSentTexts(stack.fake)).toEqual(["system: Be terse.", "user: Stream this", "user: Again"]);
  });
});

describe("ThreadkeepSession items", () => {
  const items: AgentInputItem[] = [
    { role: "user", content: "hello" },
    {
      role: "user",
      content: [
        { type: "input_text", text: "look" },
        { type: "input_image", image: "https://example.invalid/a.png", detail: "low" },
      ],
    },
    {
      type: "reasoning",
      id: "rs_1",
      content: [{ type: "input_text", text: "thinking" }],
      providerData: { encrypted: "x" },
    },
    {
      type: "message",
      role: "assistant",
      id: "msg_1",
      status: "completed",
      content: [{ type: "output_text", text: "Checking.", providerData: { annotations: [] } }],
    },
    { type: "function_call", id: "fc_1", callId: "call_1", name: "lookup", arguments: '{"q":1}', status: "completed" },
    {
      type: "function_call_result",
      callId: "call_1",
      name: "lookup",
      status: "completed",
      output: { type: "text", text: "found" },
    },
    {
      type: "hosted_tool_call",
      id: "ws_1",
      name: "web_search_call",
      status: "completed",
      providerData: { query: "x" },
    },
    { type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text: "Done." }] },
  ];

  it("round-trip exactly; what a chat model cannot take is kept but never sent", async () => {
    const s = session("agents-items");
    await s.addItems(items);
    expect(await s.getItems()).toEqual(items);
    expect(await s.getItems(3)).toEqual(items.slice(-3));
    const context = await stack.memory.buildContext(await s.getSessionId(), { userId: "alice" });
    expect(JSON.stringify(context.messages)).not.toMatch(/reasoning|thinking|web_search_call/);
    expect(context.messages.map((m) => m.role)).toEqual(["user", "user", "assistant", "tool", "assistant"]);
  });

  it("pops one item at a time, even out of a message holding several", async () => {
    const s = session("agents-pop");
    await s.addItems(items.slice(3, 6));
    expect(await s.popItem()).toEqual(items[5]);
    expect(await s.popItem()).toEqual(items[4]);
    expect(await s.getItems()).toEqual([items[3]]);
    expect(await s.popItem()).toEqual(items[3]);
    expect(await s.popItem()).toBeUndefined();
  });

  it("applies history transactions once per operation id", async () => {
    const s = session("agents-transactions");
    expect(isSessionHistoryTransactionAwareSession(s)).toBe(true);
    const append = { type: "append_items" as const, items: items.slice(0, 2) };
    await s.applyHistoryTransaction({ operationId: "op-1", transaction: append });
    await s.applyHistoryTransaction({ operationId: "op-1", transaction: append });
    expect(await s.getItems()).toEqual(items.slice(0, 2));
    await expect(
      s.applyHistoryTransaction({ operationId: "op-1", transaction: { type: "append_items", items: [items[7]] } }),
    ).rejects.toMatchObject({ code: "operation_conflict" });

    const replace = { type: "replace_suffix" as const, expectedSuffix: [items[1]], replacement: [items[7], items[0]] };
    await s.applyHistoryTransaction({ operationId: "op-2", transaction: replace });
    await s.applyHistoryTransaction({ operationId: "op-2", transaction: replace });
    expect(await s.getItems()).toEqual([items[0], items[7], items[0]]);
    await expect(
      s.applyHistoryTransaction({
        operationId: "op-3",
        transaction: { type: "replace_suffix", expectedSuffix: [items[1]], replacement: [] },
      }),
    ).rejects.toMatchObject({ code: "history_conflict" });
    expect(await s.getItems()).toEqual([items[0], items[7], items[0]]);
  });

  it("compacts with threadkeep's summaries", async () => {
    const store = createMemoryStore({ ttlMs: 0 });
    const plain = createMemory({ store });
    const summarizing = createMemory({
      store,
      window: 2,
      compaction: { threshold: 1 },
      summarizer: { summarize: async ({ messages }) => `${messages.length} earlier messages about the weather` },
    });
    try {
      const id = await new ThreadkeepSession({ memory: plain, sessionId: "agents-compaction" }).getSessionId();
      await new ThreadkeepSession({ memory: plain, sessionId: id }).addItems(items.slice(0, 6));
      const s = new ThreadkeepSession({ memory: summarizing, sessionId: id });
      expect(await new ThreadkeepSession({ memory: plain, sessionId: id }).runCompaction()).toBeNull();
      const result = await s.runCompaction();
      expect(result?.usage).toBeDefined();
      const [summary] = await summarizing.listSummaries(id);
      expect(summary.content).toMatch(/earlier messages about the weather/);
      expect(await s.runCompaction()).toBeNull();
    } finally {
      await plain.close();
    }
  });

  it("keeps users apart and clears", async () => {
    const mine = session("agents-shared-name");
    await mine.addItems([items[0]]);
    const theirs = session("agents-shared-name", "bob");
    expect(await theirs.getSessionId()).not.toBe(await mine.getSessionId());
    expect(await theirs.getItems()).toEqual([]);
    const stranger = new ThreadkeepSession({
      memory: stack.memory,
      sessionId: await mine.getSessionId(),
      userId: "bob",
    });
    expect(await stranger.getItems()).toEqual([]);
    expect(await stranger.popItem()).toBeUndefined();
    await expect(stranger.addItems([items[0]])).rejects.toMatchObject({ code: "session_not_found" });
    expect(await mine.getItems()).toEqual([items[0]]);
    await mine.clearSession();
    expect(await mine.getItems()).toEqual([]);
    expect(await new ThreadkeepSession({ memory: stack.memory }).getSessionId()).toMatch(/^[0-9a-f-]{36}$/);
  });
});
