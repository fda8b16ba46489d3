import { describe, expect, it } from "vitest";
import { seededRandom as random } from "../../../bench/_harness.js";
import { expectValidToolPairs } from "../../../test/context/_tool-pairs.js";
import type { ChatMessage, Message } from "../types.js";
import { assembleContext } from "./assemble.js";
import { countContextTokens } from "./tokens.js";

const WORDS = [
  "task",
  "groceries",
  "tomorrow",
  "delete",
  "the",
  "weather",
  "is",
  "nice",
  "ok",
  "λ",
  "日本",
  "🙂",
  "42",
];

/**
 * A history with user turns, answers, parallel tool calls (in one message, and as separate messages),
 * stray results and unanswered calls.
 */
function randomHistory(rand: () => number, length: number): Message[] {
  const text = (max: number) =>
    Array.from({ length: 1 + Math.floor(rand() * max) }, () => WORDS[Math.floor(rand() * WORDS.length)]).join(" ");
  const out: Omit<Message, "seq" | "createdAt">[] = [];
  let callId = 0;
  while (out.length < length) {
    const r = rand();
    if (r < 0.35) out.push({ role: "user", content: text(rand() < 0.1 ? 400 : 30) });
    else if (r < 0.65) out.push({ role: "assistant", content: text(60) });
    else if (r < 0.9) {
      const calls = Array.from({ length: 1 + Math.floor(rand() * 3) }, () => `call_${callId++}`);
      out.push({
        role: "assistant",
        content: rand() < 0.5 ? null : text(5),
        tool_calls: calls.map((id) => ({
          id,
          type: "function",
          function: { name: "lookup", arguments: JSON.stringify({ q: text(8) }) },
        })),
      });
      // Sometimes a result goes missing (an interrupted turn).
      for (const id of calls)
        if (rand() > 0.05) out.push({ role: "tool", tool_call_id: id, content: text(rand() < 0.1 ? 300 : 40) });
    } else if (r < 0.95) {
      // Parallel calls as separate assistant messages, one call each (the OpenAI Agents SDK's shape),
      // then their results in any order.
      const calls = Array.from({ length: 2 + Math.floor(rand() * 3) }, () => `call_${callId++}`);
      for (const id of calls)
        out.push({
          role: "assistant",
          content: null,
          tool_calls: [
            { id, type: "function", function: { name: "lookup", arguments: JSON.stringify({ q: text(4) }) } },
          ],
        });
      for (const id of [...calls].sort(() => rand() - 0.5))
        if (rand() > 0.05) out.push({ role: "tool", tool_call_id: id, content: text(20) });
    } else out.push({ role: "tool", tool_call_id: `stray_${callId++}`, content: text(10) });
  }
  return out.slice(0, length).map((m, i) => ({ ...m, seq: i + 1, createdAt: i }) as Message);
}

describe("assembleContext on random histories", () => {
  it("always yields valid tool pairs within the budget", async () => {
    const seen = { window: 0, budget: 0, toolPairs: 0, truncated: 0 };
    for (let seed = 1; seed <= 400; seed++) {
      // One assembly at a time holds the loop; 400 in one go would hold it ~0.6–0.9 s (the runner's bound).
      await new Promise((resolve) => setImmediate(resolve));
      const rand = random(seed);
      const history = randomHistory(rand, Math.floor(rand() * 120));
      const window = Math.floor(rand() * 60);
      const tokenBudget = 60 + Math.floor(rand() ** 2 * 6000);
      const input: ChatMessage[] = [
        { role: "user", content: "and now? ".repeat(1 + Math.floor(rand() * (rand() < 0.1 ? 2000 : 10))) },
      ];
      const system: ChatMessage[] = rand() < 0.7 ? [{ role: "system", content: "You are a helpful assistant." }] : [];
      const pins = rand() < 0.3 ? [1 + Math.floor(rand() * Math.max(1, history.length))] : undefined;
      const ctx = assembleContext({
        system,
        history,
        summaries: [],
        input,
        window,
        tokenBudget,
        preferences: { pinnedSeqs: pins },
      });
      try {
        expectValidToolPairs(ctx.messages);
        expect(ctx.tokens).toBeLessThanOrEqual(tokenBudget);
        expect(ctx.tokens).toBe(countContextTokens(ctx.messages));
        expect(ctx.messages[0]).toEqual(system[0] ?? ctx.messages[0]);
        expect(ctx.messages.at(-1)?.role).toBe("user");
        expect(ctx.includedSeqs.length + ctx.omitted.messages).toBe(history.length);
        if (!pins) expect(ctx.includedSeqs.length).toBeLessThanOrEqual(window);
      } catch (error) {
        throw new Error(`seed ${seed} (window ${window}, budget ${tokenBudget}): ${(error as Error).message}`, {
          cause: error,
        });
      }
      for (const key of ["window", "budget", "toolPairs"] as const) if (ctx.omitted.reasons![key] > 0) seen[key]++;
      if (ctx.omitted.truncated > 0) seen.truncated++;
    }
    // The generator must reach every way of leaving something out, or the property proves little.
    for (const count of Object.values(seen)) expect(count).toBeGreaterThan(10);
  });
});

describe("parallel calls as separate assistant messages", () => {
  it("survive a window of 4 with their results, sent as one call message", () => {
    const call = (id: string) => ({
      role: "assistant" as const,
      content: null,
      tool_calls: [{ id, type: "function", function: { name: "weather", arguments: `{"city":"${id}"}` } }],
    });
    const history = [
      { role: "user", content: "Weather in Oslo and Lima?" },
      call("oslo"),
      call("lima"),
      { role: "tool", tool_call_id: "lima", content: "22°C" },
      { role: "tool", tool_call_id: "oslo", content: "-3°C" },
    ].map((m, i) => ({ ...m, seq: i + 1, createdAt: i }) as Message);
    const ctx = assembleContext({
      system: [],
      history,
      summaries: [],
      input: [{ role: "user", content: "Warmer?" }],
      window: 4,
      tokenBudget: 8000,
    });
    expect(ctx.includedSeqs).toEqual([2, 3, 4, 5]);
    expectValidToolPairs(ctx.messages);
    expect(ctx.messages[0].tool_calls?.map((c) => c.id)).toEqual(["oslo", "lima"]);
    expect(ctx.messages.slice(1, 3).map((m) => m.content)).toEqual(["22°C", "-3°C"]);
    expect(ctx.tokens).toBe(countContextTokens(ctx.messages));
    // A window of 3 cannot hold the unit: it leaves together, not a call without its result.
    const small = assembleContext({
      system: [],
      history,
      summaries: [],
      input: [{ role: "user", content: "Warmer?" }],
      window: 3,
      tokenBudget: 8000,
    });
    expect(small.includedSeqs).toEqual([]);
  });
});
