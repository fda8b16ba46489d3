import { afterEach, describe, expect, it, vi } from "vitest";
import { CompactionHints, HINT_MAX_AGE_MS, planAfterWrite } from "./compaction-hints.js";

const settings = { window: 10, maxMessages: 30, threshold: 6, maxBatch: 100 };
/** A session summarised through 40, first seq 31, last 50: quiet up to 56, then a summary is due. */
const shape = { coveredTo: 40, firstSeq: 31, lastSeq: 50 };

afterEach(() => {
  vi.useRealTimers();
});

describe("planAfterWrite", () => {
  it("is quiet until window + threshold messages follow the summary, and checks after", () => {
    expect(planAfterWrite({ coveredTo: 0, firstSeq: 1 }, 16, settings)).toBe("none");
    expect(planAfterWrite({ coveredTo: 0, firstSeq: 1 }, 17, settings)).toBe("check");
    expect(planAfterWrite(shape, 56, settings)).toBe("none");
    expect(planAfterWrite(shape, 57, settings)).toBe("check");
  });

  it("caps without reading only when everything the cap drops is summarised", () => {
    const wide = { ...settings, window: 20, maxMessages: 16, threshold: 10 };
    expect(planAfterWrite({ coveredTo: 20, firstSeq: 5 }, 20, wide)).toBe("none");
    expect(planAfterWrite({ coveredTo: 20, firstSeq: 5 }, 36, wide)).toBe("cap");
    expect(planAfterWrite({ coveredTo: 20, firstSeq: 5 }, 37, wide)).toBe("check");
  });

  it("checks after every write with a negative threshold, as before", () => {
    expect(planAfterWrite({ coveredTo: 0, firstSeq: 1 }, 1, { ...settings, threshold: -1 })).toBe("check");
  });
});

describe("CompactionHints", () => {
  it("stands in the bounds of any session for one it has not checked", () => {
    const hints = new CompactionHints(settings);
    expect(hints.plan("a", 1, 16)).toBe("none");
    expect(hints.plan("a", 17, 18)).toBe("check");
    expect(hints.size).toBe(0);
  });

  it("forgets a hint when a write starts at or below a seq it saw: messages were removed", () => {
    const hints = new CompactionHints(settings);
    hints.learn("a", shape);
    expect(hints.plan("a", 51, 52)).toBe("none");
    expect(hints.plan("a", 52, 53)).toBe("check");
    expect(hints.size).toBe(0);
  });

  it("forgets a hint older than its age limit", () => {
    vi.useFakeTimers();
    const hints = new CompactionHints(settings);
    hints.learn("a", shape);
    vi.advanceTimersByTime(HINT_MAX_AGE_MS + 1);
    expect(hints.plan("a", 51, 52)).toBe("check");
  });

  it("keeps at most its limit of sessions, forgetting the least recently written", () => {
    const hints = new CompactionHints(settings, 3);
    for (const id of ["a", "b", "c"]) hints.learn(id, shape);
    expect(hints.plan("a", 51, 52)).toBe("none");
    hints.learn("d", shape);
    expect(hints.size).toBe(3);
    // "b" was the least recently used: without its hint, seq 52 of it needs a check.
    expect(hints.plan("b", 51, 52)).toBe("check");
    expect(hints.plan("a", 53, 54)).toBe("none");
  });

  it("plans the cap alone while what it drops is summarised, and a check once it is not", () => {
    const wide = { ...settings, window: 20, maxMessages: 16, threshold: 10 };
    const hints = new CompactionHints(wide);
    hints.learn("a", { coveredTo: 20, firstSeq: 5, lastSeq: 34 });
    expect(hints.plan("a", 35, 36)).toBe("cap");
    // Keeping the newest 16 of 37 would drop seq 21, which no summary is known to cover.
    expect(hints.plan("a", 37, 37)).toBe("check");
  });
});
