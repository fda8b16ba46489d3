import { describe, expect, it } from "vitest";
import { HISTORY_META_KEY, planReconcile, sameMessage } from "./reconcile.js";
import type { ChatMessage, Message } from "./types.js";

const u = (content: string): ChatMessage => ({ role: "user", content });
const a = (content: string): ChatMessage => ({ role: "assistant", content });
const stored = (messages: ChatMessage[], firstSeq = 1): Message[] => messages.map((m, i) => ({ ...m, seq: firstSeq + i, createdAt: 0 }));
const view = (messages: Message[]) => ({ first: messages[0], last: messages.at(-1), range: messages });

describe("planReconcile", () => {
  const line = stored([u("q1"), a("a1"), u("q2"), a("a2")]);

  it("appends what follows the stored history", () => {
    const plan = planReconcile([u("q1"), a("a1"), u("q2"), a("a2"), u("q3")], view(line), {});
    expect(plan).toMatchObject({ toStore: [u("q3")], historyStartsAt: 1 });
    expect(plan.replaceAfter).toBeUndefined();
    expect(plan.metadata).toEqual({ [HISTORY_META_KEY]: { client: "whole-history" } });
  });

  it("regenerates when the request is the stored history minus its reply", () => {
    const plan = planReconcile([u("q1"), a("a1"), u("q2")], view(line), { [HISTORY_META_KEY]: { client: "whole-history" } });
    expect(plan).toMatchObject({ replaceAfter: 3, branch: { reason: "regenerate" }, toStore: [], upToSeq: 3 });
    expect(plan.metadata).toBeUndefined();
  });

  it("edits from the first message that differs", () => {
    expect(planReconcile([u("q1"), a("a1"), u("q2 edited")], view(line), {})).toMatchObject({
      replaceAfter: 2,
      branch: { reason: "edit" },
      toStore: [u("q2 edited")],
      upToSeq: 2,
    });
    expect(planReconcile([u("q1 edited")], view(line), {})).toMatchObject({ replaceAfter: 0, toStore: [u("q1 edited")] });
  });

  it("moves the client's start when an edit goes before what the store still holds", () => {
    const capped = stored([u("q4"), a("a4"), u("q5"), a("a5")], 7);
    const plan = planReconcile([u("q1 edited")], view(capped), {});
    expect(plan).toMatchObject({ replaceAfter: 6, upToSeq: 6, historyStartsAt: 7, branch: { reason: "edit", metadata: { historyStartsAt: 1 } } });
    expect(plan.metadata).toEqual({ [HISTORY_META_KEY]: { client: "whole-history", historyStartsAt: 7 } });
  });

  it("compares role, text and tool calls, not metadata or whitespace", () => {
    const call = { id: "c1", type: "function", function: { name: "f", arguments: "{}" } };
    expect(sameMessage({ ...a(" hi \n"), metadata: { model: "m" } } as ChatMessage, a("hi"))).toBe(true);
    expect(sameMessage({ role: "assistant", content: null, tool_calls: [call] }, { role: "assistant", content: "", tool_calls: [call] })).toBe(true);
    expect(sameMessage({ role: "assistant", content: null, tool_calls: [call] }, { role: "assistant", content: null, tool_calls: [{ ...call, function: { name: "f", arguments: '{"x":1}' } }] })).toBe(false);
    expect(sameMessage(u("hi"), a("hi"))).toBe(false);
    expect(sameMessage(u("hi"), { role: "user", content: [{ type: "text", text: "hi" }] })).toBe(true);
  });
});
