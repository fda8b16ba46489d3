import { describe, expect, it } from "vitest";
import { parseClusterUrl } from "./_redis-connection.js";

describe("parseClusterUrl", () => {
  it("reads the seed nodes and the shared credentials of a cluster URL", () => {
    expect(parseClusterUrl("redis+cluster://127.0.0.1:7101,127.0.0.1:7102")).toEqual({
      rootNodes: [{ url: "redis://127.0.0.1:7101" }, { url: "redis://127.0.0.1:7102" }],
    });
    expect(parseClusterUrl("rediss+cluster://app:p%40ss:w@a.example:6380,b.example:6380/")).toEqual({
      rootNodes: [{ url: "rediss://a.example:6380" }, { url: "rediss://b.example:6380" }],
      username: "app",
      password: "p@ss:w",
    });
    expect(parseClusterUrl("redis+cluster://:secret@h:1")).toEqual({ rootNodes: [{ url: "redis://h:1" }], password: "secret" });
  });

  it("leaves single-server URLs alone", () => {
    expect(parseClusterUrl("redis://127.0.0.1:6379/6")).toBeNull();
    expect(parseClusterUrl("rediss://h:6380")).toBeNull();
  });
});
