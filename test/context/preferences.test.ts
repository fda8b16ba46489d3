import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  handleSetContextPreferences,
  parseContextPreferences,
  SET_CONTEXT_PREFERENCES,
  setContextPreferencesTool,
} from "../../src/core/context/preferences.js";
import { createMemory } from "../../src/create-memory.js";
import type { ToolCall } from "../../src/core/types.js";
import { createUpstream } from "../../src/llm/openai-compatible.js";
import { createMemoryStore } from "../../src/stores/in-process/index.js";
import { type FakeUpstream, startFakeUpstream } from "../_fake-upstream.js";

let upstream: FakeUpstream;
beforeAll(async () => {
  upstream = await startFakeUpstream();
});
afterAll(() => upstream.close());

async function sessionWith(count: number) {
  const memory = createMemory({ store: createMemoryStore({ ttlMs: 0 }), window: 4 });
  const chat = await memory.startSession();
  await chat.addMessages(
    Array.from({ length: count }, (_, i) => ({
      role: i % 2 === 0 ? ("user" as const) : ("assistant" as const),
      content: i === 4 ? "Remember: the wifi password is hunter2" : `message ${i + 1}`,
    })),
  );
  return { memory, chat };
}

const call = (args: unknown): ToolCall => ({
  id: "call_1",
  type: "function",
  function: {
    name: SET_CONTEXT_PREFERENCES,
    arguments: typeof args === "string" ? args : JSON.stringify(args),
  },
});

describe("context preferences", () => {
  it("apply on the next assembly only, unless sticky", async () => {
    const { memory, chat } = await sessionWith(30);
    expect((await chat.context()).includedSeqs).toEqual([27, 28, 29, 30]);
    await chat.setPreferences({ focusRange: { fromSeq: 5, toSeq: 6 }, maxRecentMessages: 6 });
    expect((await chat.context()).includedSeqs).toEqual([5, 6, 25, 26, 27, 28, 29, 30]);
    expect(await memory.getPreferences(chat.id)).toBeUndefined();
    expect((await chat.context()).includedSeqs).toEqual([27, 28, 29, 30]);

    await chat.setPreferences({ pinnedSeqs: [1], includeSummaries: false, sticky: true });
    expect((await chat.context()).includedSeqs).toEqual([1, 27, 28, 29, 30]);
    expect((await chat.context()).includedSeqs).toEqual([1, 27, 28, 29, 30]);
    await chat.setPreferences({}, {});
    expect(await memory.getPreferences(chat.id)).toBeUndefined();
    await memory.close();
  });

  it("rejects invalid preferences with invalid_request naming the field", async () => {
    const { memory, chat } = await sessionWith(2);
    await expect(chat.setPreferences({ focusRange: { fromSeq: 9, toSeq: 3 } })).rejects.toMatchObject({
      code: "invalid_request",
      details: { field: "preferences.focusRange.toSeq" },
    });
    await expect(chat.setPreferences({ maxRecentMessages: 0 })).rejects.toMatchObject({
      details: { field: "preferences.maxRecentMessages" },
    });
    expect(() => parseContextPreferences({ pinned: [1] })).toThrow(
      expect.objectContaining({ details: { field: "preferences.pinned" } }),
    );
    expect(() => parseContextPreferences({ pinnedSeqs: [1.5] })).toThrow(/preferences.pinnedSeqs.0/);
    await memory.close();
  });

  it("recall turns a search hit into a focus on that older turn", async () => {
    const { memory, chat } = await sessionWith(40);
    const hit = await chat.recall("wifi password", { around: 1 });
    expect(hit).toMatchObject({ seq: 5, message: { content: "Remember: the wifi password is hunter2" } });
    expect(hit?.snippet).toContain("wifi password");
    const context = await chat.context({ input: [{ role: "user", content: "what was the wifi password?" }] });
    expect(context.includedSeqs).toEqual([4, 5, 6, 37, 38, 39, 40]);
    expect(context.messages.some((m) => m.content === "Remember: the wifi password is hunter2")).toBe(true);
    expect(await chat.recall("nothing like this")).toBeNull();
    // Across the owner's sessions: search without a session id.
    const other = await memory.startSession();
    await other.addMessage({ role: "user", content: "the wifi password changed" });
    expect((await memory.search("wifi password")).map((h) => h.sessionId).sort()).toEqual([chat.id, other.id].sort());
    await memory.close();
  });

  it("lets a model ask for context through the set_context_preferences tool", async () => {
    const { memory, chat } = await sessionWith(30);
    upstream.setReply(() => ({
      tool_calls: [
        {
          id: "call_7",
          type: "function",
          function: { name: SET_CONTEXT_PREFERENCES, arguments: '{"focusRange":{"fromSeq":1,"toSeq":2}}' },
        },
      ],
    }));
    const model = createUpstream({ baseUrl: upstream.url });
    const first = await chat.context({ input: [{ role: "user", content: "what did I say first?" }] });
    const reply = await model.chat({
      model: "fake",
      messages: first.messages,
      tools: [setContextPreferencesTool],
    });
    expect(upstream.chatRequests().at(-1)?.body.tools[0].function.name).toBe("set_context_preferences");
    // The fake upstream sends a whole call (id, type, function).
    const toolCall = reply.choices?.[0]?.message?.tool_calls?.[0] as ToolCall;
    const toolMessage = await handleSetContextPreferences(memory, chat.id, toolCall);
    expect(toolMessage).toEqual({
      role: "tool",
      tool_call_id: "call_7",
      content: JSON.stringify({ ok: true, preferences: { focusRange: { fromSeq: 1, toSeq: 2 } } }),
    });
    const next = await chat.context();
    expect(next.includedSeqs).toEqual([1, 2, 27, 28, 29, 30]);
    await memory.close();
  });

  it("answers a model's bad arguments in the tool message instead of throwing", async () => {
    const { memory, chat } = await sessionWith(2);
    const bad = await handleSetContextPreferences(memory, chat.id, call({ maxRecentMessages: -3 }));
    expect(JSON.parse(bad.content as string)).toEqual({
      ok: false,
      error: expect.stringContaining("preferences.maxRecentMessages"),
    });
    const notJson = await handleSetContextPreferences(memory, chat.id, call("{oops"));
    expect(JSON.parse(notJson.content as string)).toEqual({
      ok: false,
      error: "arguments are not valid JSON",
    });

    await handleSetContextPreferences(memory, chat.id, call({ pinnedSeqs: [1], sticky: true }));
    const merged = await handleSetContextPreferences(memory, chat.id, call({ includeSummaries: false }));
    expect(JSON.parse(merged.content as string).preferences).toEqual({
      pinnedSeqs: [1],
      sticky: true,
      includeSummaries: false,
    });
    const reset = await handleSetContextPreferences(memory, chat.id, call({ reset: true, maxRecentMessages: 8 }));
    expect(JSON.parse(reset.content as string).preferences).toEqual({ maxRecentMessages: 8 });
    await expect(handleSetContextPreferences(memory, "not-a-session", call({}))).rejects.toMatchObject({
      code: "invalid_session_id",
    });
    await memory.close();
  });

  it("describes the tool as an OpenAI function whose fields the validator accepts", () => {
    expect(setContextPreferencesTool.type).toBe("function");
    const properties = Object.keys(setContextPreferencesTool.function.parameters.properties);
    expect(properties).toEqual([
      "maxRecentMessages",
      "focusRange",
      "includeSummaries",
      "pinnedSeqs",
      "sticky",
      "recallTopic",
      "recallScope",
      "memories",
      "memoryIds",
      "reset",
    ]);
    const { reset: _reset, ...example } = {
      maxRecentMessages: 5,
      focusRange: { fromSeq: 1, toSeq: 3 },
      includeSummaries: true,
      pinnedSeqs: [2],
      sticky: false,
      recallTopic: "the car",
      recallScope: "user",
      reset: true,
    };
    expect(parseContextPreferences(example)).toEqual(example);
  });
});
