import { describe, expect, it } from "vitest";
import { toChatMessage, validateMessages } from "../messages.js";
import type { Message } from "../types.js";
import { itemsToMessages, messageToItems, normalizeInput } from "./index.js";

/** Stores messages as a store would (seq, createdAt) and reads their items back. */
function roundTrip(items: ReturnType<typeof normalizeInput>) {
  const messages = itemsToMessages(items);
  validateMessages(messages);
  const stored: Message[] = structuredClone(messages).map((m, i) => ({ ...m, seq: i + 1, createdAt: 1 }));
  return { messages, back: stored.flatMap((m) => messageToItems(m)) };
}

describe("items ↔ chat messages", () => {
  it("a string input is one user message, stored as plain chat content", () => {
    const items = normalizeInput("hello");
    expect(items).toEqual([
      {
        id: expect.stringMatching(/^msg_/),
        type: "message",
        role: "user",
        content: [{ type: "input_text", text: "hello" }],
        status: "completed",
      },
    ]);
    const { messages, back } = roundTrip(items);
    expect(messages.map(toChatMessage)).toEqual([{ role: "user", content: "hello" }]);
    expect(back).toEqual(items);
  });

  it("assistant text and parallel function calls are one chat message; outputs are tool messages", () => {
    const items = normalizeInput([
      { role: "user", content: "weather in Paris and Rome?" },
      { type: "message", role: "assistant", content: [{ type: "output_text", text: "Checking." }] },
      { type: "function_call", call_id: "call_1", name: "weather", arguments: '{"city":"Paris"}' },
      { type: "function_call", call_id: "call_2", name: "weather", arguments: '{"city":"Rome"}', id: "fc_given" },
      { type: "function_call_output", call_id: "call_1", output: "sunny" },
      { type: "function_call_output", call_id: "call_2", output: "rain" },
    ]);
    const { messages, back } = roundTrip(items);
    expect(messages.map(toChatMessage)).toEqual([
      { role: "user", content: "weather in Paris and Rome?" },
      {
        role: "assistant",
        content: "Checking.",
        tool_calls: [
          { id: "call_1", type: "function", function: { name: "weather", arguments: '{"city":"Paris"}' } },
          { id: "call_2", type: "function", function: { name: "weather", arguments: '{"city":"Rome"}' } },
        ],
      },
      { role: "tool", tool_call_id: "call_1", content: "sunny" },
      { role: "tool", tool_call_id: "call_2", content: "rain" },
    ]);
    expect(back).toEqual(items);
    expect(back[3].id).toBe("fc_given");
  });

  it("items a chat model cannot read are kept in metadata, never in the chat message", () => {
    const reasoning = { type: "reasoning", id: "rs_1", summary: [{ type: "summary_text", text: "thinking" }] };
    const items = normalizeInput([
      { role: "user", content: "hi" },
      reasoning,
      { role: "assistant", content: "hello", status: "completed" },
      { type: "web_search_call", id: "ws_1", status: "completed", action: { type: "search", query: "x" } },
    ]);
    const { messages, back } = roundTrip(items);
    expect(messages.map(toChatMessage)).toEqual([
      { role: "user", content: "hi" },
      { role: "assistant", content: "hello" },
    ]);
    expect(back).toEqual(items);
  });

  it("parts, images, annotations, refusals and developer messages come back exactly", () => {
    const items = normalizeInput([
      { role: "developer", content: "be brief" },
      {
        role: "user",
        content: [
          { type: "input_text", text: "what is this?" },
          { type: "input_image", image_url: "data:image/png;base64,AAAA", detail: "low" },
        ],
      },
      {
        type: "message",
        role: "assistant",
        id: "msg_a",
        status: "completed",
        content: [
          {
            type: "output_text",
            text: "a cat",
            annotations: [{ type: "url_citation", url: "https://x", start_index: 0, end_index: 1, title: "t" }],
          },
        ],
      },
      { role: "assistant", content: [{ type: "refusal", refusal: "no" }] },
      { type: "function_call_output", call_id: "c", output: [{ type: "input_text", text: "part" }] },
    ]);
    const { messages, back } = roundTrip(items);
    expect(toChatMessage(messages[1]).content).toEqual([
      { type: "text", text: "what is this?" },
      { type: "image_url", image_url: { url: "data:image/png;base64,AAAA", detail: "low" } },
    ]);
    expect(messages[3]).toMatchObject({ role: "assistant", refusal: "no" });
    expect(back).toEqual(items);
  });

  it("a chat completions history reads as items with ids that stay put", () => {
    const history: Message[] = [
      { seq: 1, createdAt: 1, role: "user", content: "add a task" },
      {
        seq: 2,
        createdAt: 1,
        role: "assistant",
        content: null,
        tool_calls: [{ id: "t1", type: "function", function: { name: "add", arguments: "{}" } }],
      },
      { seq: 3, createdAt: 1, role: "tool", tool_call_id: "t1", content: "ok" },
      { seq: 4, createdAt: 1, role: "assistant", content: "Done." },
    ];
    const items = history.flatMap((m) => messageToItems(m));
    expect(items).toEqual([
      {
        id: "msg_tk1",
        type: "message",
        role: "user",
        content: [{ type: "input_text", text: "add a task" }],
        status: "completed",
      },
      { id: "fc_tk2_1", type: "function_call", call_id: "t1", name: "add", arguments: "{}", status: "completed" },
      { id: "fco_tk3", type: "function_call_output", call_id: "t1", output: "ok", status: "completed" },
      {
        id: "msg_tk4",
        type: "message",
        role: "assistant",
        content: [{ type: "output_text", text: "Done.", annotations: [] }],
        status: "completed",
      },
    ]);
    expect(history.flatMap((m) => messageToItems(m))).toEqual(items);
    // Stored again through the Responses side, they spell the same chat messages.
    expect(itemsToMessages(items).map(toChatMessage)).toEqual(history.map(toChatMessage));
  });

  it("refuses malformed input with the offending field", () => {
    expect(() => normalizeInput(42)).toThrow(/input: must be a string or an array/);
    expect(() => normalizeInput([{ role: "robot", content: "x" }])).toThrow(/input\[0\]\.role/);
    expect(() => normalizeInput([{ type: "function_call", call_id: "c", name: "n" }])).toThrow(/input\[0\]\.arguments/);
    expect(() => normalizeInput([{ role: "user", content: [{ type: "input_audio" }] }])).toThrow(
      /input\[0\]\.content\[0\]\.type/,
    );
    expect(() => normalizeInput([{ type: "item_reference", id: "msg_1" }])).toThrow(/item_reference is not supported/);
  });
});
