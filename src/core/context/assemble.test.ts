import { describe, expect, it } from "vitest";
import { expectValidToolPairs } from "../../../test/context/_tool-pairs.js";
import type { Message, Summary } from "../types.js";
import { assembleContext } from "./assemble.js";
import { countContextTokens } from "./tokens.js";
import type { ContextInput } from "./types.js";

let clock = 1_000;
const stamp = (messages: Omit<Message, "seq" | "createdAt">[], firstSeq = 1): Message[] =>
  messages.map((m, i) => ({ ...m, seq: firstSeq + i, createdAt: clock++ }) as Message);
const user = (content: string) => ({ role: "user" as const, content });
const assistant = (content: string) => ({ role: "assistant" as const, content });
const call = (id: string, name = "lookup") => ({
  role: "assistant" as const,
  content: null,
  tool_calls: [{ id, type: "function", function: { name, arguments: `{"q":"${id}"}` } }],
});
const result = (id: string, content = `result of ${id}`) => ({
  role: "tool" as const,
  tool_call_id: id,
  content,
});

function assemble(overrides: Partial<ContextInput>): ReturnType<typeof assembleContext> {
  return assembleContext({
    system: [],
    history: [],
    summaries: [],
    input: [],
    window: 20,
    tokenBudget: 8000,
    ...overrides,
  });
}

describe("assembleContext", () => {
  it("puts system, summaries, state note, window and input in that order", () => {
    const history = stamp([user("one"), assistant("two"), user("three"), assistant("four")], 11);
    const summaries: Summary[] = [
      { id: 1, fromSeq: 1, toSeq: 10, content: "They talked about groceries.", createdAt: 1 },
    ];
    const state = { version: 1, data: { conversation: { references: [{ type: "task", id: 42, at: 1 }] } } };
    const ctx = assemble({
      system: [{ role: "system", content: "Be brief." }],
      history,
      summaries,
      state,
      input: [user("five")],
    });
    expect(ctx.messages.map((m) => m.role)).toEqual([
      "system",
      "system",
      "system",
      "user",
      "assistant",
      "user",
      "assistant",
      "user",
    ]);
    expect(ctx.messages[1].content).toContain("messages 1–10");
    expect(ctx.messages[2].content).toContain("Recently referenced: task 42");
    expect(ctx.includedSeqs).toEqual([11, 12, 13, 14]);
    expect(ctx.includedSummaryIds).toEqual([1]);
    expect(ctx.tokens).toBe(countContextTokens(ctx.messages));
    expect(ctx.messages[3]).toEqual({ role: "user", content: "one" });
  });

  it("keeps the window, reporting what it left out and why", () => {
    const history = stamp(Array.from({ length: 30 }, (_, i) => (i % 2 ? assistant(`a${i}`) : user(`u${i}`))));
    const ctx = assemble({ history, window: 10 });
    expect(ctx.includedSeqs).toEqual(Array.from({ length: 10 }, (_, i) => 21 + i));
    expect(ctx.omitted.messages).toBe(20);
    expect(ctx.omitted.reasons).toEqual({ window: 20, budget: 0, toolPairs: 0 });
    expect(ctx.omitted.tokens).toBeGreaterThan(20 * 3);
  });

  it("never starts with a stray tool result and keeps calls with their results", () => {
    const history = stamp([
      user("q"),
      call("c1"),
      result("c1"),
      assistant("a"),
      user("q2"),
      call("c2"),
      result("c2"),
      assistant("done"),
    ]);
    // A window of 2 would start at c2's result: the pair goes together or not at all.
    const ctx = assemble({ history, window: 2 });
    expect(ctx.includedSeqs).toEqual([8]);
    expect(assemble({ history, window: 3 }).includedSeqs).toEqual([6, 7, 8]);
    const wider = assemble({ history, window: 4 });
    expect(wider.includedSeqs).toEqual([5, 6, 7, 8]);
    expectValidToolPairs(wider.messages);
  });

  it("drops a call whose results are missing, and stray results", () => {
    const history = stamp([result("ghost"), user("q"), call("c1"), user("next")]);
    const ctx = assemble({ history });
    expect(ctx.includedSeqs).toEqual([2, 4]);
    expect(ctx.omitted.reasons?.toolPairs).toBe(2);
  });

  it("carries the stored call whose results arrive in the input", () => {
    const history = stamp([user("q"), call("c1")]);
    const ctx = assemble({ history, input: [result("c1"), result("nobody")] });
    expect(ctx.messages.map((m) => m.role)).toEqual(["user", "assistant", "tool"]);
    expect(ctx.omitted.input).toBe(1);
  });

  it("stays within the token budget, dropping the oldest first", () => {
    const long = "word ".repeat(300);
    const history = stamp(Array.from({ length: 10 }, (_, i) => user(`${i} ${long}`)));
    const ctx = assemble({ history, tokenBudget: 1000 });
    expect(ctx.tokens).toBeLessThanOrEqual(1000);
    expect(ctx.includedSeqs).toEqual([8, 9, 10]);
    expect(ctx.omitted.reasons).toEqual({ window: 0, budget: 7, toolPairs: 0 });
  });

  it("cuts a message larger than the budget instead of failing, never dropping the system prompt", () => {
    const huge = "lorem ipsum dolor ".repeat(2000);
    const ctx = assemble({
      system: [{ role: "system", content: "Rules." }],
      input: [user(huge)],
      tokenBudget: 500,
    });
    expect(ctx.tokens).toBeLessThanOrEqual(500);
    expect(ctx.messages[0]).toEqual({ role: "system", content: "Rules." });
    expect(ctx.messages[1].content).toMatch(/\[… truncated by threadkeep: \d+ tokens left out\]$/);
    expect(ctx.omitted.truncated).toBe(1);

    const stored = assemble({ history: stamp([user("hi"), user(huge)]), tokenBudget: 400 });
    expect(stored.includedSeqs).toEqual([2]);
    expect(stored.tokens).toBeLessThanOrEqual(400);
    expect(stored.omitted.truncated).toBe(1);
  });

  it("says which seqs it left out and why, and what each part costs", () => {
    const long = "word ".repeat(300);
    const history = stamp([
      result("ghost"),
      ...Array.from({ length: 8 }, (_, i) => user(`${i} ${long}`)),
      user("hi"),
      user(long.repeat(4)),
    ]);
    const ctx = assemble({
      system: [{ role: "system", content: "Be brief." }],
      history,
      summaries: [{ id: 3, fromSeq: 0, toSeq: 0, content: "Before.", createdAt: 1 }],
      input: [user("now")],
      window: 9,
      tokenBudget: 700,
    });
    expect(ctx.omitted.seqs).toEqual({ window: [2], budget: [3, 4, 5, 6, 7, 8, 9, 10], toolPairs: [1] });
    expect(ctx.omitted.truncatedSeqs).toEqual([11]);
    expect(ctx.includedSeqs).toEqual([11]);
    const parts = ctx.parts!;
    expect(parts.system).toBe(countContextTokens([{ role: "system", content: "Be brief." }]) - parts.priming);
    expect(parts.summary).toBeGreaterThan(0);
    expect(parts.history).toBeGreaterThan(400);
    expect(Object.values(parts).reduce((a, b) => a + b, 0)).toBe(ctx.tokens);
  });

  it("applies preferences: larger window, focus range, pins, no summaries", () => {
    const history = stamp(Array.from({ length: 40 }, (_, i) => user(`m${i + 1}`)));
    const summaries: Summary[] = [{ id: 7, fromSeq: 1, toSeq: 20, content: "earlier", createdAt: 1 }];
    const ctx = assemble({
      history,
      summaries,
      window: 5,
      preferences: {
        maxRecentMessages: 8,
        focusRange: { fromSeq: 3, toSeq: 4 },
        pinnedSeqs: [10],
        includeSummaries: false,
      },
    });
    expect(ctx.includedSeqs).toEqual([3, 4, 10, 33, 34, 35, 36, 37, 38, 39, 40]);
    expect(ctx.includedSummaryIds).toEqual([]);
    expect(ctx.omitted.summaries).toBe(1);
  });

  it("sends only the widest of rolling summaries, and none the window already shows", () => {
    const summaries: Summary[] = [
      { id: 1, fromSeq: 1, toSeq: 20, content: "first", createdAt: 1 },
      { id: 2, fromSeq: 1, toSeq: 40, content: "rolled", createdAt: 2 },
    ];
    const ctx = assemble({ history: stamp([user("x")], 60), summaries });
    expect(ctx.includedSummaryIds).toEqual([2]);
    expect(ctx.omitted.summaries).toBe(0);
    const tight = assemble({ history: stamp([user("x")], 60), summaries, tokenBudget: 12 });
    expect(tight.includedSummaryIds).toEqual([]);
    expect(tight.omitted.summaries).toBe(1);
    const covered = assemble({
      history: stamp([user("x")], 30),
      summaries: [{ ...summaries[0], fromSeq: 30, toSeq: 30 }],
    });
    expect(covered.includedSummaryIds).toEqual([]);
  });

  it("counts with the model's encoding and rejects nonsense limits", () => {
    expect(assemble({ model: "gpt-4" }).encoding).toBe("cl100k_base");
    expect(assemble({ model: "gpt-4o-mini" }).encoding).toBe("o200k_base");
    expect(assemble({ model: "llama3.1:8b" }).encoding).toBe("o200k_base");
    expect(() => assemble({ window: -1 })).toThrow(/window/);
    expect(() => assemble({ tokenBudget: 0 })).toThrow(/tokenBudget/);
  });

  it("counts text that contains special-token spellings as text", () => {
    const ctx = assemble({ input: [user("what is <|endoftext|>?")] });
    expect(ctx.tokens).toBeGreaterThan(3);
  });
});
