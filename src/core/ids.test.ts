import { describe, expect, it } from "vitest";
import { isThreadkeepError } from "./errors.js";
import { isValidSessionId, newSessionId, parseSessionId, scopedSessionId } from "./ids.js";

const U1 = "0b7c2f0e-9d4a-4a55-8f1e-2b6c7d8e9f00";
const U2 = "1c8d3a1f-ae5b-4b66-9a2f-3c7d8e9fa011";

describe("session ids", () => {
  it("generates UUID v4 ids that validate", () => {
    const id = newSessionId();
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(isValidSessionId(id)).toBe(true);
    expect(newSessionId()).not.toBe(id);
  });

  it("accepts canonical UUIDs and user-scoped ids, normalising case", () => {
    expect(parseSessionId(U1.toUpperCase())).toBe(U1);
    expect(parseSessionId(`user_${U1}_conv_${U2}`)).toBe(`user_${U1}_conv_${U2}`);
    expect(scopedSessionId(U1, U2)).toBe(`user_${U1}_conv_${U2}`);
  });

  it.each([
    "",
    "abc",
    `${U1}x`,
    `user_${U1}_conv_`,
    `user_${U1}_conv_${U2}_extra`,
    "0b7c2f0e9d4a4a558f1e2b6c7d8e9f00",
    "../../etc/passwd",
    "x".repeat(5000),
    `'; DROP TABLE sessions; --`,
  ])("rejects %j with invalid_session_id", (bad) => {
    expect(isValidSessionId(bad)).toBe(false);
    try {
      parseSessionId(bad);
      expect.unreachable();
    } catch (error) {
      expect(isThreadkeepError(error, "invalid_session_id")).toBe(true);
    }
  });

  it("rejects non-strings", () => {
    for (const bad of [undefined, null, 42, {}, []]) expect(() => parseSessionId(bad)).toThrow(/Invalid session id/);
  });

  it("rejects a scoped id built from non-UUID parts", () => {
    expect(() => scopedSessionId("alice", U2)).toThrow(/Invalid session id/);
  });
});
