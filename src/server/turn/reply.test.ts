import { describe, expect, it } from "vitest";
import { replyMessage } from "./reply.js";

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
