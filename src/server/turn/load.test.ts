import { describe, expect, it } from "vitest";
import { replyMessage, splitMessages } from "./load.js";

describe("splitMessages", () => {
  it("takes the messages after the last assistant message as the new turn, system messages apart", () => {
    const split = splitMessages([
      { role: "system", content: "s" },
      { role: "user", content: "u1" },
      { role: "assistant", content: "a1" },
      { role: "developer", content: "d" },
      { role: "user", content: "u2" },
    ]);
    expect(split.system.map((m) => m.content)).toEqual(["s", "d"]);
    expect(split.conversation.map((m) => m.content)).toEqual(["u1", "a1", "u2"]);
    expect(split.newTurn.map((m) => m.content)).toEqual(["u2"]);
  });

  it("treats a request without an assistant message as all new", () => {
    expect(
      splitMessages([
        { role: "user", content: "a" },
        { role: "user", content: "b" },
      ]).newTurn,
    ).toHaveLength(2);
  });
});

describe("replyMessage", () => {
  it("keeps content, tool calls and refusal; drops nulls and reasoning; records the model", () => {
    const call = { id: "c", type: "function", function: { name: "f", arguments: "{}" } };
    expect(
      replyMessage(
        { role: "assistant", content: null, tool_calls: [call], refusal: null, reasoning_content: "hmm" },
        { model: "m", finishReason: "tool_calls" },
      ),
    ).toEqual({
      role: "assistant",
      content: null,
      tool_calls: [call],
      metadata: { model: "m", finishReason: "tool_calls" },
    });
    expect(replyMessage({ role: "assistant", content: "hi", tool_calls: [] })).toEqual({
      role: "assistant",
      content: "hi",
    });
    expect(replyMessage({ role: "assistant" })).toEqual({ role: "assistant", content: "" });
    expect(replyMessage(undefined)).toBeNull();
  });
});
