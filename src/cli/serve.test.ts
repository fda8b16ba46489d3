import { describe, expect, it } from "vitest";
import { checkExposure, memoriesShared, redactUrl } from "./serve.js";

describe("serve helpers", () => {
  it("masks a password in a store URL", () => {
    expect(redactUrl("postgres://app:s3cret@db:5432/threadkeep")).toBe(
      "postgres://app:***@db:5432/threadkeep",
    );
    expect(redactUrl("sqlite:./data/threadkeep.db")).toBe("sqlite:./data/threadkeep.db");
    expect(redactUrl("redis://127.0.0.1:6379")).toBe("redis://127.0.0.1:6379");
  });

  it("allows loopback without keys and anything with keys", () => {
    expect(() => checkExposure({ host: "127.0.0.1", apiKeys: new Map() })).not.toThrow();
    expect(() => checkExposure({ host: "::1", apiKeys: new Map() })).not.toThrow();
    expect(() => checkExposure({ host: "0.0.0.0", apiKeys: new Map([["k", "u"]]) })).not.toThrow();
    expect(() => checkExposure({ host: "0.0.0.0", apiKeys: new Map() })).toThrow(/Refusing/);
    expect(() => checkExposure({ host: "192.168.1.5", apiKeys: new Map() })).toThrow(/Refusing/);
  });
});

describe("--memories auto behind one shared key", () => {
  const one = new Map([["k", "team"]]);
  it("warns off loopback without an end-user header, and only then", () => {
    expect(memoriesShared({ host: "0.0.0.0", apiKeys: one }, { memories: "auto" })).toMatch(/everyone who uses the key is one user/);
    expect(memoriesShared({ host: "127.0.0.1", apiKeys: one }, { memories: "auto" })).toBeUndefined();
    expect(memoriesShared({ host: "0.0.0.0", apiKeys: one, userHeader: "x-user" }, { memories: "auto" })).toBeUndefined();
    expect(memoriesShared({ host: "0.0.0.0", apiKeys: new Map([["a", "ann"], ["b", "bob"]]) }, { memories: "auto" })).toBeUndefined();
    expect(memoriesShared({ host: "0.0.0.0", apiKeys: one }, { memories: "off" })).toBeUndefined();
  });
});
