import { describe, expect, it } from "vitest";

// The inspector's own module: browser JavaScript without declarations (this part of it is pure).
const ui = new URL("../../src/server/ui/context.js", import.meta.url).href;
const { othersReasons } = (await import(ui)) as { othersReasons: (recalled: unknown) => string[] };

describe("the inspector's reasons for each turn recalled from another session", () => {
  it("names the session, seq, role, day, rank, score and matched words, the hit a neighbour sat beside, and the time asked about", () => {
    const at = Date.UTC(2023, 4, 8, 13);
    const reasons = othersReasons([
      { seq: 4, score: 0.3, query: "q" }, // of this session: not listed here
      {
        seq: 7,
        score: 0.67,
        query: "q",
        sessionId: "0b8c5c0e-aaaa",
        title: "Clay",
        createdAt: at,
        role: "user",
        rank: 2,
        matched: ["pottery", "class"],
        when: "in may",
      },
      {
        seq: 8,
        score: 0,
        query: "q",
        sessionId: "0b8c5c0e-aaaa",
        createdAt: at,
        role: "assistant",
        rank: 2,
        matched: [],
        neighbourOf: 7,
      },
    ]);
    expect(reasons).toEqual([
      "Clay #7 user · 2023-05-08 · rank 2, score 0.67, matched: pottery, class, said in the time asked about (“in may”)",
      "0b8c5c0e #8 assistant · 2023-05-08 · beside hit #7",
    ]);
    expect(othersReasons(undefined)).toEqual([]);
  });
});
