import { describe, expect, it } from "vitest";
import { createUpstream } from "../llm/openai-compatible.js";
import { parseSwitch, recallMemoryOptions, resolveRecallConfig } from "./_recall-options.js";

describe("summary settings of serve and chat", () => {
  it("are on by default, off by flag or environment, with an optional model", () => {
    expect(resolveRecallConfig({}, {})).toMatchObject({
      summaries: true,
      summaryModel: undefined,
      embeddingModel: undefined,
      recall: true,
    });
    expect(resolveRecallConfig({ summaries: false }, { THREADKEEP_SUMMARIES: "on" }).summaries).toBe(false);
    expect(resolveRecallConfig({}, { THREADKEEP_SUMMARIES: "off", THREADKEEP_SUMMARY_MODEL: "small" })).toMatchObject({
      summaries: false,
      summaryModel: "small",
    });
    expect(resolveRecallConfig({ summaryModel: "flag" }, { THREADKEEP_SUMMARY_MODEL: "env" }).summaryModel).toBe(
      "flag",
    );
    expect(() => parseSwitch("maybe", "THREADKEEP_SUMMARIES", true)).toThrow(/must be on or off/);
  });

  it("give the memory a background summarizer only when there is an upstream", () => {
    const upstream = createUpstream({ baseUrl: "http://127.0.0.1:9/v1" });
    const on = recallMemoryOptions({ summaries: true, recall: true, recallScope: "session" }, {}, upstream);
    expect(typeof on.summarizer?.summarize).toBe("function");
    expect(on.compaction).toEqual({ background: true });
    const none = { recall: { enabled: true, scope: "session" } };
    expect(recallMemoryOptions({ summaries: true, recall: true, recallScope: "session" }, {}, undefined)).toEqual(none);
    expect(recallMemoryOptions({ summaries: false, recall: true, recallScope: "session" }, {}, upstream)).toEqual(none);
  });

  it("turn embeddings on with a model, served by the upstream unless an embedding URL is given", () => {
    const env = { THREADKEEP_EMBEDDING_MODEL: "emb", THREADKEEP_RECALL: "off" };
    const recall = resolveRecallConfig({}, env);
    expect(recall).toMatchObject({ embeddingModel: "emb", recall: false });
    const options = recallMemoryOptions(recall, { upstreamUrl: "http://127.0.0.1:9/v1" }, undefined);
    expect(options.embedder?.model).toBe("emb");
    expect(options.recall).toEqual({ enabled: false, scope: "session" });
    expect(() => recallMemoryOptions(recall, {}, undefined)).toThrow(/needs --embedding-url/);
  });

  it("recall in the session by default, across the user's sessions with --recall-scope user or its variable", () => {
    expect(resolveRecallConfig({}, {}).recallScope).toBe("session");
    expect(resolveRecallConfig({}, { THREADKEEP_RECALL_SCOPE: "user" }).recallScope).toBe("user");
    expect(resolveRecallConfig({ recallScope: "session" }, { THREADKEEP_RECALL_SCOPE: "user" }).recallScope).toBe(
      "session",
    );
    expect(recallMemoryOptions(resolveRecallConfig({ recallScope: "user" }, {}), {}, undefined).recall).toEqual({
      enabled: true,
      scope: "user",
    });
    expect(() => resolveRecallConfig({ recallScope: "everyone" }, {})).toThrow(
      /--recall-scope must be session or user/,
    );
    expect(() => resolveRecallConfig({}, { THREADKEEP_RECALL_SCOPE: "all" })).toThrow(
      /THREADKEEP_RECALL_SCOPE must be session or user/,
    );
  });

  it("take --memories auto or off (default off) and a memory model, from flags or environment", () => {
    expect(resolveRecallConfig({}, {})).toMatchObject({ memories: "off", memoryModel: undefined });
    expect(resolveRecallConfig({}, { THREADKEEP_MEMORIES: "auto", THREADKEEP_MEMORY_MODEL: "small" })).toMatchObject({
      memories: "auto",
      memoryModel: "small",
    });
    expect(resolveRecallConfig({ memories: "off" }, { THREADKEEP_MEMORIES: "auto" }).memories).toBe("off");
    expect(() => resolveRecallConfig({ memories: "always" }, {})).toThrow(/must be auto or off, got "always"/);
  });
});
