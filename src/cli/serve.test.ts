import { describe, expect, it } from "vitest";
import { checkExposure, redactUrl } from "./serve.js";

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
