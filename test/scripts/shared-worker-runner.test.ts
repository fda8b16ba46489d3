/**
 * test/_runner.ts fails a test file that leaves the shared worker changed; its check names each thing
 * left behind, and finds nothing in a clean process (this file runs under it, so a false alarm would
 * fail this very file).
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { leftBehind } from "../_runner.js";

afterEach(() => {
  vi.restoreAllMocks();
  vi.useRealTimers();
  delete process.env.THREADKEEP_RUNNER_PROBE;
});

describe("the shared-worker check", () => {
  it("finds nothing when the file put everything back", () => {
    expect(leftBehind({ ...process.env })).toEqual([]);
  });

  it("names a mocked console method, fake timers and a changed, added or removed variable", () => {
    const before = { ...process.env, THREADKEEP_RUNNER_GONE: "x" };
    vi.spyOn(console, "warn").mockImplementation(() => {});
    vi.useFakeTimers();
    process.env.THREADKEEP_RUNNER_PROBE = "1";
    expect(leftBehind(before)).toEqual([
      "console.warn still mocked (vi.restoreAllMocks())",
      "fake timers still on (vi.useRealTimers())",
      "process.env.THREADKEEP_RUNNER_GONE changed",
      "process.env.THREADKEEP_RUNNER_PROBE changed",
    ]);
  });
});
