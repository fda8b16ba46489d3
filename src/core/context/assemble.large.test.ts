import { beforeAll, describe, expect, it } from "vitest";
import { threadCpuMs } from "../../../test/_thread-cpu.js";
import type { Message } from "../types.js";
import { assembleContext } from "./assemble.js";
import { countContextTokens } from "./tokens.js";

const TEN_MB = 10 * 1024 * 1024;
/** The worst shapes for a tokenizer: one run without spaces, emoji, CJK, base64, dense code. */
const shapes: Record<string, string> = {
  "no spaces": "x".repeat(TEN_MB),
  emoji: "😀🎉👍🏽".repeat(TEN_MB / 8),
  CJK: "漢字かなカナ한국어".repeat(TEN_MB / 9),
  base64: "QUJDRGVmZ2hpamts+/09".repeat(TEN_MB / 20),
  code: "function f(a,b){return a+b;}\n  const x=[1,2,3].map((v)=>v*2);\n".repeat(TEN_MB / 64),
};

describe("assembleContext on huge input", () => {
  // Loading the encoding's tables is a one-off cost the server pays at start, not per turn.
  beforeAll(() => countContextTokens([{ role: "user", content: "warm up" }]));

  for (const [shape, text] of Object.entries(shapes)) {
    it(`cuts a 10 MB message (${shape}) to the budget in well under a second`, () => {
      const history: Message[] = [{ role: "user", content: text, seq: 1, createdAt: 1 }];
      const start = threadCpuMs();
      const ctx = assembleContext({
        system: [{ role: "system", content: "Be brief." }],
        history,
        summaries: [],
        input: [{ role: "user", content: text }],
        window: 20,
        tokenBudget: 8000,
      });
      const cpuMs = threadCpuMs() - start;
      expect(cpuMs).toBeLessThan(500);
      expect(ctx.tokens).toBeLessThanOrEqual(8000);
      expect(ctx.tokens).toBe(countContextTokens(ctx.messages));
      expect(ctx.omitted.truncated).toBe(1);
      const last = ctx.messages.at(-1)?.content as string;
      expect(last).toMatch(/\[… truncated by threadkeep: \d+ tokens left out\]$/);
      expect(text.startsWith(last.slice(0, last.lastIndexOf("\n[…")))).toBe(true);
    });
  }

  it("cuts many large input messages with one sort, not a scan per cut", () => {
    const input = Array.from({ length: 20_000 }, (_, i) => ({
      role: "user" as const,
      content: `${i} ${"ab".repeat(250)}`,
    }));
    const start = threadCpuMs();
    const ctx = assembleContext({ system: [], history: [], summaries: [], input, window: 20, tokenBudget: 8000 });
    expect(threadCpuMs() - start).toBeLessThan(1500);
    expect(ctx.messages).toHaveLength(20_000);
    expect(ctx.omitted.truncated).toBe(20_000);
  });
});
