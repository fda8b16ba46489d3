import { describe, expect, it } from "vitest";
import type { UserMemory } from "../store-types.js";
import { lexicalScore, renderMemoryNote, selectMemories, words } from "./user-memories.js";
import { TokenCounter } from "./tokens.js";

const memory = (id: string, text: string, at: number): UserMemory => ({
  id,
  userId: "ann",
  text,
  createdAt: at,
  updatedAt: at,
  source: { kind: "hand" },
  metadata: {},
  history: [],
});
const counter = new TokenCounter("o200k_base");

describe("memories in the context", () => {
  const list = [
    memory("a", "Is vegetarian", 1),
    memory("b", "Manager is Sam", 2),
    memory("c", "Allergic to peanuts", 3),
  ];

  it("takes all, oldest first, when the note fits", () => {
    const { note, report } = selectMemories([...list].reverse(), { query: "hi", budget: 1000, counter });
    expect(note).toBe(renderMemoryNote(list));
    expect(report.included.map((m) => [m.id, m.reason])).toEqual([
      ["a", "all"],
      ["b", "all"],
      ["c", "all"],
    ]);
    expect(report.tokens).toBe(counter.message({ role: "system", content: note as string }));
  });

  it("takes pinned, then related, then recent within the budget when not all fit", () => {
    const header = counter.message({ role: "system", content: renderMemoryNote([]) });
    const line = (m: UserMemory) => counter.text(`- [${m.id}] ${m.text}`) + 1;
    // Room for two of the three.
    const budget = header + line(list[1]) + line(list[2]);
    expect(budget).toBeLessThan(header + line(list[0]) + line(list[1]) + line(list[2]));
    const { note, report } = selectMemories(list, {
      query: "any peanuts in the satay?",
      pinned: ["b", "gone"],
      budget,
      counter,
    });
    expect(report.included).toEqual([
      { id: "b", reason: "pinned" },
      { id: "c", reason: "related", score: expect.any(Number) },
    ]);
    expect(report.omitted).toBe(1);
    expect(report.missingPinned).toEqual(["gone"]);
    expect(report.tokens).toBeLessThanOrEqual(budget);
    expect(note).not.toContain("vegetarian");
  });

  it("ranks by shared words without stop words", () => {
    expect(words("The Manager is SAM!")).toEqual(["manager", "sam"]);
    const query = new Set(words("who manages the team"));
    expect(lexicalScore(query, "Manager is Sam")).toBeGreaterThan(lexicalScore(query, "Is vegetarian"));
  });

  it("is empty with no memories or no room", () => {
    expect(selectMemories([], { query: "", budget: 100, counter }).note).toBeNull();
    expect(selectMemories(list, { query: "", budget: 1, counter }).report).toMatchObject({ included: [], omitted: 3 });
  });
});
