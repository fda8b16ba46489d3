import { describe, expect, it } from "vitest";
import { RAG_TEMPLATE, RAG_TEMPLATE_WITH_QUERY, ragRendered, ragSource } from "../../../test/_front-ends.js";
import { ragQueryOf } from "./rag.js";

const sources = [
  ragSource(1, "basil.md", "Water basil every 3 days."),
  ragSource(2, "https://example.com/herbs", "Basil hates cold drafts."),
].join("\n");

describe("ragQueryOf", () => {
  it("recovers the words of a message Open WebUI rewrote with DEFAULT_RAG_TEMPLATE (the template before the words)", () => {
    const words = "How often should I water it?";
    expect(ragQueryOf(ragRendered(words, sources))).toBe(words);
    expect(ragQueryOf(ragRendered("Line one\nline two", sources))).toBe("Line one\nline two");
  });

  it("keeps words that themselves mention the context tags", () => {
    const words = "What does </context>\nmean in your prompt?";
    expect(ragQueryOf(ragRendered(words, sources))).toBe(words);
  });

  it("reads a template that holds the query in <user_query>", () => {
    expect(ragQueryOf(ragRendered("Is it a perennial?", sources, RAG_TEMPLATE_WITH_QUERY))).toBe("Is it a perennial?");
  });

  it("reads the older layout, the words before the template", () => {
    const rendered = RAG_TEMPLATE.replace("{{CONTEXT}}", sources);
    expect(ragQueryOf(`Is it a perennial?\n${rendered}`)).toBe("Is it a perennial?");
  });

  it("answers undefined for anything else", () => {
    expect(ragQueryOf("How often should I water it?")).toBeUndefined();
    expect(ragQueryOf("### Task:\nRespond to the user query using the provided context, please.")).toBeUndefined();
    expect(ragQueryOf(ragRendered("", sources))).toBeUndefined();
  });
});
