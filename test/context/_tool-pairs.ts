import { expect } from "vitest";
import type { ChatMessage } from "../../src/core/types.js";

/** The chat API's rule: results directly after their call, every call answered, no stray result. */
export function expectValidToolPairs(messages: ChatMessage[]): void {
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i];
    if (m.role === "assistant" && m.tool_calls?.length) {
      const ids = new Set(m.tool_calls.map((c) => c.id));
      let j = i + 1;
      while (j < messages.length && messages[j].role === "tool") {
        expect(
          ids.delete(messages[j].tool_call_id!),
          `result ${messages[j].tool_call_id} answers the call at ${i}`,
        ).toBe(true);
        j++;
      }
      expect([...ids], `calls of message ${i} all answered`).toEqual([]);
      i = j - 1;
    } else {
      expect(m.role, `message ${i} is not a stray tool result`).not.toBe("tool");
    }
  }
}
