import { describe, expect, it } from "vitest";
import { parseDuration, parsePositiveInt } from "./policies.js";

describe("policies", () => {
  it("parses durations", () => {
    expect(parseDuration("7d")).toBe(604_800_000);
    expect(parseDuration("30m")).toBe(1_800_000);
    expect(parseDuration("1h30m")).toBe(5_400_000);
    expect(parseDuration("500ms")).toBe(500);
    expect(parseDuration("1500")).toBe(1500);
    expect(parseDuration(42)).toBe(42);
  });

  it.each(["", "7 days", "d7", "-1d", "1x", "1d junk"])("rejects %j", (bad) => {
    expect(() => parseDuration(bad)).toThrow(/Invalid duration/);
  });

  it("parses positive integers", () => {
    expect(parsePositiveInt("20", "window")).toBe(20);
    expect(() => parsePositiveInt("0", "window")).toThrow(/window must be/);
    expect(() => parsePositiveInt("2.5", "window")).toThrow(/window must be/);
  });
});
