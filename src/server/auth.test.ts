import { describe, expect, it } from "vitest";
import { createAuthenticator, createOperatorCheck, isLoopbackHost, toApiKeyMap } from "./auth.js";

describe("createAuthenticator", () => {
  it("makes every caller the default user when no keys are configured", () => {
    const auth = createAuthenticator(new Map());
    expect(auth(undefined)).toBe("default");
    expect(auth("Bearer sk-anything")).toBe("default");
  });

  it("maps a bearer key to its user and refuses others with invalid_api_key", () => {
    const auth = createAuthenticator(toApiKeyMap({ "tk-a": "alice", "tk-b": "bob" }));
    expect(auth("Bearer tk-a")).toBe("alice");
    expect(auth("bearer  tk-b ")).toBe("bob");
    for (const header of [undefined, "", "Bearer", "Bearer tk-c", "tk-a", "Basic tk-a", "Bearer tk-a2"]) {
      expect(() => auth(header)).toThrow(expect.objectContaining({ code: "invalid_api_key", status: 401 }));
    }
  });
});

describe("createOperatorCheck", () => {
  it("is true only for the bearer keys flagged operator", () => {
    const isOperator = createOperatorCheck(["tk-ops", "tk-ops"]);
    expect(isOperator("Bearer tk-ops")).toBe(true);
    expect(isOperator("bearer  tk-ops ")).toBe(true);
    for (const header of [undefined, "", "Bearer", "Bearer tk-a", "tk-ops", "Basic tk-ops", "Bearer tk-ops2"])
      expect(isOperator(header)).toBe(false);
    expect(createOperatorCheck([])("Bearer tk-ops")).toBe(false);
  });
});

describe("isLoopbackHost", () => {
  it("knows loopback addresses", () => {
    for (const host of ["127.0.0.1", "127.1.2.3", "localhost", "::1", "[::1]"]) expect(isLoopbackHost(host)).toBe(true);
    for (const host of ["0.0.0.0", "::", "192.168.0.2", "example.com", "128.0.0.1"])
      expect(isLoopbackHost(host)).toBe(false);
  });
});
