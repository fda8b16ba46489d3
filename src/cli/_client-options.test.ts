import { describe, expect, it } from "vitest";
import { CLIENT_LIMIT_DEFAULTS, resolveClientLimits } from "../server/connections.js";
import { resolveClientFlags } from "./_client-options.js";

describe("slow-client settings of serve", () => {
  it("take flags, then the environment, and leave the rest to the server's defaults", () => {
    expect(resolveClientFlags({}, {})).toEqual({});
    const env = {
      THREADKEEP_HEADERS_TIMEOUT: "5s",
      THREADKEEP_MAX_CONNECTIONS: "100",
      THREADKEEP_STREAM_STALL_TIMEOUT: "1m",
    };
    expect(resolveClientFlags({ headersTimeout: "750ms", idleTimeout: "2000" }, env)).toEqual({
      headersTimeoutMs: 750,
      idleTimeoutMs: 2000,
      maxConnections: 100,
      streamStallTimeoutMs: 60_000,
    });
    expect(resolveClientLimits(resolveClientFlags({ requestTimeout: "90s" }, {}))).toEqual({
      ...CLIENT_LIMIT_DEFAULTS,
      requestTimeoutMs: 90_000,
    });
  });

  it("refuse values that do not parse or cannot hold together", () => {
    expect(() => resolveClientFlags({ headersTimeout: "soon" }, {})).toThrow(/Invalid duration/);
    expect(() => resolveClientFlags({}, { THREADKEEP_MAX_CONNECTIONS: "-1" })).toThrow(
      /max connections must be a positive whole number/,
    );
    expect(() => resolveClientLimits({ idleTimeoutMs: 0 })).toThrow(/idleTimeoutMs must be a positive whole number/);
    expect(() => resolveClientLimits({ headersTimeoutMs: 30_000, requestTimeoutMs: 10_000 })).toThrow(
      /cannot be longer than the request time-out/,
    );
  });
});
