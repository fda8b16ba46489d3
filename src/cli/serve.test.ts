import { describe, expect, it } from "vitest";
import { resolveConfig } from "./options.js";
import { checkExposure, memoriesShared, redactUrl, startServe } from "./serve.js";

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

describe("operator keys from --api-keys", () => {
  it("passes key:user:operator on to the server and says how many at start", async () => {
    const lines: string[] = [];
    const config = resolveConfig({ store: "memory:", port: "0", apiKeys: "tk-gw:acme,tk-ops:acme:operator", userHeader: "X-User" }, {});
    const server = await startServe(config, (line) => lines.push(line));
    try {
      expect(lines[0]).toContain("api keys: 2 (1 operator)");
      const me = (key: string) => server.app.inject({ method: "GET", url: "/v1/users/me", headers: { authorization: `Bearer ${key}`, "x-threadkeep-user": "ann" } });
      expect((await me("tk-ops")).json()).toMatchObject({ id: "acme/ann", operator: true, canOpenUsers: true });
      expect((await me("tk-gw")).json()).toMatchObject({ error: { code: "operator_only" } });
    } finally {
      await server.close();
    }
  });
});
