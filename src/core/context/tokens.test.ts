import { countTokens as cl100k } from "gpt-tokenizer/encoding/cl100k_base";
import { countTokens as o200k } from "gpt-tokenizer/encoding/o200k_base";
import { describe, expect, it } from "vitest";
import { threadCpuMs } from "../../../test/_thread-cpu.js";
import { clearTokenCache, encodingForModel, MESSAGE_OVERHEAD_TOKENS, TokenCounter } from "./tokens.js";

describe("TokenCounter", () => {
  it("counts like gpt-tokenizer, cached or not, for many texts of one length", () => {
    clearTokenCache();
    const counter = new TokenCounter("o200k_base");
    // Same length, different content: more than one cache bucket holds, and short texts too.
    const texts = Array.from(
      { length: 40 },
      (_, i) => `${String(i).padStart(3, "0")} ${"abcdefghij".repeat(5).slice(i % 10)}${"xyz".repeat(i % 10)}`,
    );
    texts.push("ok", "ja", "", "日本語のテキスト", "x".repeat(5000));
    for (let round = 0; round < 2; round++) {
      for (const text of texts) expect(counter.text(text)).toBe(o200k(text));
      // Fresh copies, as a store read delivers them.
      for (const text of JSON.parse(JSON.stringify(texts)) as string[]) expect(counter.text(text)).toBe(o200k(text));
    }
    expect(new TokenCounter("cl100k_base").text(texts[0])).toBe(cl100k(texts[0]));
  });

  it("counts a message's overhead, name, tool calls and non-text parts", () => {
    const counter = new TokenCounter("o200k_base");
    expect(counter.message({ role: "user", content: "hello" })).toBe(MESSAGE_OVERHEAD_TOKENS + 1);
    expect(counter.message({ role: "user", content: "hello", name: "alice" })).toBe(
      MESSAGE_OVERHEAD_TOKENS + 1 + 1 + 1,
    );
    const image = { type: "image_url", image_url: { url: "data:…" } };
    expect(counter.message({ role: "user", content: [{ type: "text", text: "hello" }, image] })).toBe(
      MESSAGE_OVERHEAD_TOKENS + 1 + 85,
    );
    const call = {
      role: "assistant" as const,
      content: null,
      tool_calls: [{ id: "c1", type: "function", function: { name: "f", arguments: "{}" } }],
    };
    expect(counter.message(call)).toBeGreaterThan(2 * MESSAGE_OVERHEAD_TOKENS);
  });

  it("cuts a text to a number of tokens", () => {
    const counter = new TokenCounter("o200k_base");
    const head = counter.head("one two three four five six", 3);
    expect(o200k(head)).toBeLessThanOrEqual(3);
    expect("one two three four five six".startsWith(head)).toBe(true);
  });

  it("picks the encoding by model name", () => {
    expect(encodingForModel("gpt-4")).toBe("cl100k_base");
    expect(encodingForModel("gpt-4-0613")).toBe("cl100k_base");
    expect(encodingForModel("gpt-3.5-turbo")).toBe("cl100k_base");
    expect(encodingForModel("openai/gpt-4-turbo")).toBe("cl100k_base");
    expect(encodingForModel("gpt-4o")).toBe("o200k_base");
    expect(encodingForModel("gpt-4.1-mini")).toBe("o200k_base");
    expect(encodingForModel("o3-mini")).toBe("o200k_base");
    expect(encodingForModel("qwen2.5:7b")).toBe("o200k_base");
    expect(encodingForModel(undefined)).toBe("o200k_base");
  });
});

/** A deterministic pseudo-random generator (mulberry32), so failures reproduce. */
function random(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const PIECES = [
  "the",
  "Quick",
  "brown",
  "fox's",
  "don't",
  "42",
  "1234567",
  "  ",
  " ",
  "\n",
  "\n\n",
  "\t",
  "(",
  ");",
  "=>",
  "漢字",
  "かな",
  "😀",
  "👍🏽",
  "é",
  "naïve",
  "\u00a0",
  "http://x.io/a?b=c",
  '{"k": [1, 2]}',
  "    return x;",
  "-",
  "__init__",
];

describe("TokenCounter on long texts", () => {
  it("counts a long text in chunks exactly as gpt-tokenizer counts it whole, when it has whitespace", () => {
    const next = random(9);
    for (let round = 0; round < 20; round++) {
      let text = "";
      while (text.length < 6000) text += PIECES[Math.floor(next() * PIECES.length)] + (next() < 0.6 ? " " : "");
      clearTokenCache();
      expect(new TokenCounter("o200k_base").text(text)).toBe(o200k(text));
      expect(new TokenCounter("cl100k_base").text(text)).toBe(cl100k(text));
    }
  });

  it("counts runs without whitespace within a token per 256 characters", () => {
    for (const text of ["x".repeat(4000), "QUJD".repeat(1000), "😀🎉".repeat(1000), "漢字かなカナ".repeat(600)]) {
      const counted = new TokenCounter("o200k_base").text(text);
      expect(Math.abs(counted - o200k(text))).toBeLessThanOrEqual(Math.ceil(text.length / 256));
    }
  });

  // Before chunking, 100 KB without a space took ~12 s and 300 KB of emoji overflowed the stack.
  it("counts and cuts 10 MB of any shape in bounded time with a limit", () => {
    const shapes = ["x".repeat(10_000_000), "😀".repeat(5_000_000), "漢".repeat(10_000_000), "aZ+/".repeat(2_500_000)];
    // Warmed first on other texts of each shape: the bound is about the work, not the encoding's first
    // load and compile (300-360 ms of a first 10 MB cut run alone, idle). The cache is emptied before
    // each measured cut, so no chunk of the warm-up is reused.
    for (const text of ["y".repeat(1_000_000), "😃".repeat(500_000), "字".repeat(1_000_000), "bY-_".repeat(250_000)])
      new TokenCounter("o200k_base", { limit: 8000 }).head(text, 1000);
    for (const text of shapes) {
      clearTokenCache();
      const counter = new TokenCounter("o200k_base", { limit: 8000 });
      const start = threadCpuMs();
      const count = counter.text(text);
      const head = counter.head(text, 1000);
      const ms = threadCpuMs() - start;
      expect(count).toBeGreaterThan(8000);
      expect(text.startsWith(head)).toBe(true);
      expect(o200k(head)).toBeLessThanOrEqual(1001);
      expect(ms).toBeLessThan(250);
    }
  });
});

describe("TokenCounter.textSharing", () => {
  it("counts a cut of a long text plus a marker exactly as counting it afresh does", () => {
    const next = random(21);
    for (let round = 0; round < 12; round++) {
      let text = "";
      while (text.length < 20_000) text += PIECES[Math.floor(next() * PIECES.length)] + (next() < 0.5 ? " " : "");
      if (round % 3 === 0) text = "Qx9/".repeat(5000);
      clearTokenCache();
      const counter = new TokenCounter("o200k_base", { limit: 3000 });
      counter.text(text);
      const keep = 100 + Math.floor(next() * 2500);
      const head = counter.head(text, keep);
      const content = `${head}\n[… truncated by threadkeep: 9 tokens left out]`;
      const shared = counter.textSharing(content, text, head.length);
      clearTokenCache();
      expect(shared).toBe(new TokenCounter("o200k_base").text(content));
    }
  });
});
