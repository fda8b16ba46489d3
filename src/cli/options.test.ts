import { describe, expect, it } from "vitest";
import { parseApiKeyEntries, parseApiKeys, parseTrustProxy, resolveConfig } from "./options.js";

describe("CLI configuration", () => {
  it("uses defaults with nothing set", () => {
    const config = resolveConfig({}, {});
    expect(config).toMatchObject({
      host: "127.0.0.1",
      port: 8787,
      store: "sqlite:./data/threadkeep.db",
      window: 20,
      maxMessages: 200,
      workers: 1,
    });
    expect(config.ttlMs).toBe(7 * 86_400_000);
    expect(config.apiKeys.size).toBe(0);
  });

  it("prefers flags over environment", () => {
    const env = { THREADKEEP_PORT: "9000", THREADKEEP_STORE: "memory:", THREADKEEP_WINDOW: "10", THREADKEEP_TTL: "1h" };
    expect(resolveConfig({}, env)).toMatchObject({ port: 9000, store: "memory:", window: 10, ttlMs: 3_600_000 });
    expect(resolveConfig({ port: "1234", window: "5" }, env)).toMatchObject({ port: 1234, window: 5 });
    expect(resolveConfig({ store: "memory:" }, {}).ttlMs).toBe(30 * 60_000);
    expect(resolveConfig({}, { THREADKEEP_WORKERS: "4" }).workers).toBe(4);
    expect(resolveConfig({ workers: "2" }, { THREADKEEP_WORKERS: "4" }).workers).toBe(2);
    expect(() => resolveConfig({ workers: "0" }, {})).toThrow(/workers/);
  });

  it("reads the fair-share limits and the upstream timeout, and refuses malformed ones", () => {
    expect(resolveConfig({}, {})).toMatchObject({
      upstreamTimeoutMs: 120_000,
      fairShare: {
        userConcurrency: 16,
        userRate: { requests: 600, seconds: 60 },
        keyConcurrency: 0,
        keyRate: null,
        refusalDelayMs: 1000,
      },
    });
    const env = {
      THREADKEEP_USER_CONCURRENCY: "off",
      THREADKEEP_USER_RATE: "10/s",
      THREADKEEP_KEY_RATE: "5000/h",
      THREADKEEP_UPSTREAM_TIMEOUT: "30s",
    };
    expect(resolveConfig({ keyConcurrency: "64", refusalDelay: "0" }, env)).toMatchObject({
      upstreamTimeoutMs: 30_000,
      fairShare: {
        userConcurrency: 0,
        userRate: { requests: 10, seconds: 1 },
        keyConcurrency: 64,
        keyRate: { requests: 5000, seconds: 3600 },
        refusalDelayMs: 0,
      },
    });
    expect(resolveConfig({ userRate: "off" }, {}).fairShare.userRate).toBeNull();
    expect(resolveConfig({ userRate: "120" }, {}).fairShare.userRate).toEqual({ requests: 120, seconds: 60 });
    expect(() => resolveConfig({ userRate: "fast" }, {})).toThrow(/--user-rate must be requests per period/);
    expect(() => resolveConfig({ userConcurrency: "-1" }, {})).toThrow(/--user-concurrency must be a whole number/);
    expect(() => resolveConfig({ upstreamTimeout: "10ms" }, {})).toThrow(/at least 100ms/);
  });

  it("parses API keys and rejects malformed ones", () => {
    expect([...parseApiKeys("k1:alice, k2:bob")]).toEqual([
      ["k1", "alice"],
      ["k2", "bob"],
    ]);
    expect(() => parseApiKeys("justakey")).toThrow(/expected key:user/);
    expect(() => parseApiKeys("k1:")).toThrow(/expected key:user/);
    expect(() => resolveConfig({ window: "zero" }, {})).toThrow(/window must be/);
  });

  it("reads the :operator flag after key:user, and only there", () => {
    const { keys, operators } = parseApiKeyEntries(
      "k1:acme, k2:acme:operator, k:with:colon:bob:operator, k3:operator, k4:x:y",
    );
    expect([...keys]).toEqual([
      ["k1", "acme"],
      ["k2", "acme"],
      ["k:with:colon", "bob"],
      ["k3", "operator"],
      ["k4:x", "y"],
    ]);
    expect([...operators]).toEqual(["k2", "k:with:colon"]);
    expect([...parseApiKeys("k2:acme:operator")]).toEqual([["k2", "acme"]]);
    expect(() => parseApiKeyEntries(":operator")).toThrow(/expected key:user/);
    expect(() => parseApiKeyEntries("k:  :operator")).toThrow(/expected key:user/);
    // A key given twice keeps its last entry, flag and all.
    expect([...parseApiKeyEntries("k2:acme:operator,k2:acme").operators]).toEqual([]);
    expect(resolveConfig({}, { THREADKEEP_API_KEYS: "k1:acme,k2:acme:operator" })).toMatchObject({
      apiKeys: new Map([
        ["k1", "acme"],
        ["k2", "acme"],
      ]),
      operatorKeys: new Set(["k2"]),
    });
  });

  it("reads the end-user options from flags or environment, and refuses token settings without a secret", () => {
    expect(resolveConfig({}, {})).toMatchObject({ userHeader: undefined, userJwt: undefined });
    expect(resolveConfig({}, { THREADKEEP_USER_HEADER: "X-OpenWebUI-User-Id" }).userHeader).toBe("X-OpenWebUI-User-Id");
    expect(resolveConfig({ userHeader: "X-User" }, { THREADKEEP_USER_HEADER: "X-Other" }).userHeader).toBe("X-User");
    expect(resolveConfig({}, { THREADKEEP_USER_JWT_SECRET: "s3cret" }).userJwt).toEqual({ secret: "s3cret" });
    expect(resolveConfig({ userJwtSecret: "s", userJwtIssuer: "gw", userJwtHeader: "X-Token" }, {}).userJwt).toEqual({
      secret: "s",
      issuer: "gw",
      header: "X-Token",
    });
    expect(() => resolveConfig({ userJwtIssuer: "gw" }, {})).toThrow(/need --user-jwt-secret/);
    expect(() => resolveConfig({}, { THREADKEEP_USER_JWT_HEADER: "X-Token" })).toThrow(/need --user-jwt-secret/);
  });

  it("reads the session headers in order, lower-cased, and refuses a name that is no header name", () => {
    expect(resolveConfig({}, {}).sessionHeaders).toEqual(["x-session-id", "x-openwebui-chat-id", "x-conversation-id"]);
    expect(resolveConfig({}, { THREADKEEP_SESSION_HEADERS: "X-Chat, x-session-id" }).sessionHeaders).toEqual([
      "x-chat",
      "x-session-id",
    ]);
    expect(resolveConfig({ sessionHeaders: "x-a" }, { THREADKEEP_SESSION_HEADERS: "x-b" }).sessionHeaders).toEqual([
      "x-a",
    ]);
    expect(() => resolveConfig({ sessionHeaders: "x chat" }, {})).toThrow(/Invalid session header name "x chat"/);
  });

  it("reads --trust-proxy as off, on, or addresses and CIDRs, and refuses anything else by name", () => {
    expect(resolveConfig({}, {}).trustProxy).toBe(false);
    expect(resolveConfig({}, { THREADKEEP_TRUST_PROXY: "on" }).trustProxy).toBe(true);
    expect(resolveConfig({ trustProxy: "off" }, { THREADKEEP_TRUST_PROXY: "on" }).trustProxy).toBe(false);
    expect(parseTrustProxy("127.0.0.1, 10.0.0.0/8,::1,loopback")).toEqual([
      "127.0.0.1",
      "10.0.0.0/8",
      "::1",
      "loopback",
    ]);
    for (const bad of ["2", "nginx", "10.0.0.0/8/1", "10.0.0/8", "127.0.0.1/abc"]) {
      expect(() => parseTrustProxy(bad), bad).toThrow(/--trust-proxy must be/);
    }
  });
});
