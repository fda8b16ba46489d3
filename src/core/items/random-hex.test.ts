import { describe, expect, it } from "vitest";
import { randomHex } from "./random-hex.js";

describe("randomHex", () => {
  it("gives hex of the asked length, never the same twice, across pool refills", () => {
    const seen = new Set<string>();
    for (let i = 0; i < 2000; i++) {
      const hex = randomHex(24);
      expect(hex).toMatch(/^[0-9a-f]{48}$/);
      seen.add(hex);
    }
    expect(seen.size).toBe(2000);
    expect(randomHex(5000)).toMatch(/^[0-9a-f]{10000}$/);
  });

  it("uses every hex digit about equally (bytes really are random)", () => {
    const counts = new Map<string, number>();
    for (const digit of randomHex(4000 * 8).slice(0, 64_000)) counts.set(digit, (counts.get(digit) ?? 0) + 1);
    expect(counts.size).toBe(16);
    for (const n of counts.values()) expect(Math.abs(n - 4000)).toBeLessThan(400);
  });
});
