import { describe, expect, it } from "vitest";
import { createUpstream } from "../llm/openai-compatible.js";
import { parseSwitch, recallMemoryOptions, resolveRecallConfig } from "./_recall-options.js";

describe("summary settings of serve and chat", () => {
  it("are on by default, off by flag or environment, with an optional model", () => {
    expect(resolveRecallConfig({}, {})).toEqual({ summaries: true, summaryModel: undefined });
    expect(resolveRecallConfig({ summaries: false }, { THREADKEEP_SUMMARIES: "on" }).summaries).toBe(false);
    expect(resolveRecallConfig({}, { THREADKEEP_SUMMARIES: "off", THREADKEEP_SUMMARY_MODEL: "small" })).toEqual({
      summaries: false,
      summaryModel: "small",
    });
    expect(resolveRecallConfig({ summaryModel: "flag" }, { THREADKEEP_SUMMARY_MODEL: "env" }).summaryModel).toBe("flag");
    expect(() => parseSwitch("maybe", "THREADKEEP_SUMMARIES", true)).toThrow(/must be on or off/);
  });

  it("give the memory a background summarizer only when there is an upstream", () => {
    const upstream = createUpstream({ baseUrl: "http://127.0.0.1:9/v1" });
    const on = recallMemoryOptions({ summaries: true }, {}, upstream);
    expect(typeof on.summarizer?.summarize).toBe("function");
    expect(on.compaction).toEqual({ background: true });
    expect(recallMemoryOptions({ summaries: true }, {}, undefined)).toEqual({});
    expect(recallMemoryOptions({ summaries: false }, {}, upstream)).toEqual({});
  });
});
