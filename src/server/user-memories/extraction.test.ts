import { describe, expect, it } from "vitest";
import {
  extractionRequest,
  MalformedExtraction,
  MAX_OPERATIONS,
  normaliseMemoryText,
  parseExtraction,
} from "./extraction.js";

const known = [{ id: "uuid-a" }, { id: "uuid-b" }];

describe("the extraction contract", () => {
  it("shows known memories under handles and the new messages by role", () => {
    const request = extractionRequest([{ text: "Is vegetarian" }], [{ seq: 3, role: "user", text: "I moved" }]);
    expect(request.handles).toEqual(["m1"]);
    expect(request.messages[1].content).toBe("KNOWN MEMORIES:\n[m1] Is vegetarian\n\nNEW MESSAGES:\nuser: I moved");
    expect(extractionRequest([], []).messages[1].content).toContain("KNOWN MEMORIES:\n(none)");
  });

  it("resolves handles to ids and drops what names nothing shown, ill-shaped operations and repeats", () => {
    const answer = JSON.stringify({
      operations: [
        { op: "add", text: " Likes tea " },
        { op: "update", ref: "m2", text: "Lives in Utrecht", contradiction: true },
        { op: "delete", ref: "m2" },
        { op: "delete", ref: "uuid-a" },
        { op: "update", ref: "m3", text: "ghost" },
        { op: "add", text: "" },
        { op: "rename", ref: "m1" },
      ],
    });
    expect(parseExtraction(answer, known)).toEqual({
      operations: [
        { op: "add", text: "Likes tea" },
        { op: "update", id: "uuid-b", text: "Lives in Utrecht", contradiction: true },
      ],
      rejected: 5,
    });
    expect(parseExtraction('```json\n{"operations":[{"op":"delete","ref":"m1"}]}\n```', known).operations).toEqual([
      { op: "delete", id: "uuid-a" },
    ]);
    const many = JSON.stringify({
      operations: Array.from({ length: 30 }, (_, i) => ({ op: "add", text: `fact ${i}` })),
    });
    expect(parseExtraction(many, known)).toMatchObject({ rejected: 30 - MAX_OPERATIONS });
  });

  it("refuses whole what is not JSON of the contract's shape, or too long", () => {
    for (const content of [
      "not json",
      "[]",
      '{"ops":[]}',
      "null",
      JSON.stringify({ operations: [] }).padEnd(40_000, " "),
      undefined,
      42,
    ]) {
      expect(() => parseExtraction(content, known)).toThrow(MalformedExtraction);
    }
  });

  it("compares texts without case, accents, punctuation or spacing", () => {
    expect(normaliseMemoryText("  Lives in  UTRECHT! ")).toBe(normaliseMemoryText("lives in utrecht."));
    expect(normaliseMemoryText("Café owner")).toBe("cafe owner");
    expect(normaliseMemoryText("Lives in Utrecht")).not.toBe(normaliseMemoryText("Lives in Amsterdam"));
  });
});
