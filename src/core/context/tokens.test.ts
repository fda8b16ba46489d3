import { countTokens as cl100k } from "gpt-tokenizer/encoding/cl100k_base";
import { countTokens as o200k } from "gpt-tokenizer/encoding/o200k_base";
import { describe, expect, it } from "vitest";
import { clearTokenCache, encodingForModel, MESSAGE_OVERHEAD_TOKENS, TokenCounter } from "./tokens.js";

describe("TokenCounter", () => {
  it("counts like gpt-tokenizer, cached or not, for many texts of one length", () => {
    clearTokenCache();
    const counter = new TokenCounter("o200k_base");
    // Same length, different content: more than one cache bucket holds, and short texts too.
    const texts = Array.from(
      { length: 40 },
      (_, i) =>
        `${String(i).padStart(3, "0")} ${"abcdefghij".repeat(5).slice(i % 10)}${"xyz".repeat(i % 10)}`,
    );
    texts.push("ok", "ja", "", "日本語のテキスト", "x".repeat(5000));
    for (let round = 0; round < 2; round++) {
      for (const text of texts) expect(counter.text(text)).toBe(o200k(text));
      // Fresh copies, as a store read delivers them.
      for (const text of JSON.parse(JSON.stringify(texts)) as string[])
        expect(counter.text(text)).toBe(o200k(text));
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
