import { describe, expect, it } from "vitest";
import { resolveConfig } from "./options.js";
import { checkExposure, memoriesShared, redactUrl, sharedKeyNotice, startServe } from "./serve.js";

describe("serve helpers", () => {
  it("masks a password in a store URL", () => {
    expect(redactUrl("postgres://app:s3cret@db:5432/threadkeep")).toBe("postgres://app:***@db:5432/threadkeep");
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
    expect(memoriesShared({ host: "0.0.0.0", apiKeys: one }, { memories: "auto" })).toMatch(
      /everyone who uses the key is one user/,
    );
    expect(memoriesShared({ host: "127.0.0.1", apiKeys: one }, { memories: "auto" })).toBeUndefined();
    expect(
      memoriesShared({ host: "0.0.0.0", apiKeys: one, userHeader: "x-user" }, { memories: "auto" }),
    ).toBeUndefined();
    expect(
      memoriesShared(
        {
          host: "0.0.0.0",
          apiKeys: new Map([
            ["a", "ann"],
            ["b", "bob"],
          ]),
        },
        { memories: "auto" },
      ),
    ).toBeUndefined();
    expect(memoriesShared({ host: "0.0.0.0", apiKeys: one }, { memories: "off" })).toBeUndefined();
  });
});

describe("API keys off loopback without a user identity", () => {
  const at = (flags: Record<string, string>) => resolveConfig({ store: "memory:", ...flags }, {});
  it("says at start that everyone behind a key is one user, and how to name the person", () => {
    const notice = sharedKeyNotice(at({ host: "0.0.0.0", apiKeys: "tk-gw:team" }));
    expect(notice).toMatch(
      /each API key is one threadkeep user: everyone who uses a key shares its session list, search, memories and fair-share budget, 16 model requests in flight/,
    );
    expect(notice).toMatch(/--user-jwt-secret/);
    expect(notice).toMatch(/--user-header X-OpenWebUI-User-Id/);
    // Several keys may still each be a team's: the notice stands.
    expect(sharedKeyNotice(at({ host: "10.0.0.5", apiKeys: "a:ann,b:bob" }))).toBeDefined();
  });

  it("stays quiet on loopback, without keys, or with the end user named per request", () => {
    expect(sharedKeyNotice(at({ host: "127.0.0.1", apiKeys: "tk-gw:team" }))).toBeUndefined();
    expect(
      sharedKeyNotice(at({ host: "0.0.0.0", apiKeys: "tk-gw:team", userHeader: "X-OpenWebUI-User-Id" })),
    ).toBeUndefined();
    expect(
      sharedKeyNotice(at({ host: "0.0.0.0", apiKeys: "tk-gw:team", userJwtSecret: "s".repeat(32) })),
    ).toBeUndefined();
    expect(sharedKeyNotice(at({ host: "127.0.0.1" }))).toBeUndefined();
  });
});

describe("operator keys from --api-keys", () => {
  it("passes key:user:operator on to the server and says how many at start", async () => {
    const lines: string[] = [];
    const config = resolveConfig(
      { store: "memory:", port: "0", apiKeys: "tk-gw:acme,tk-ops:acme:operator", userHeader: "X-User" },
      {},
    );
    const server = await startServe(config, (line) => lines.push(line));
    try {
      expect(lines[0]).toContain("api keys: 2 (1 operator)");
      const me = (key: string) =>
        server.app.inject({
          method: "GET",
          url: "/v1/users/me",
          headers: { authorization: `Bearer ${key}`, "x-threadkeep-user": "ann" },
        });
      expect((await me("tk-ops")).json()).toMatchObject({ id: "acme/ann", operator: true, canOpenUsers: true });
      expect((await me("tk-gw")).json()).toMatchObject({ error: { code: "operator_only" } });
    } finally {
      await server.close();
    }
  });
});
