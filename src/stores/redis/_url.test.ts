import { describe, expect, it } from "vitest";
import { isThreadkeepError } from "../../core/errors.js";
import { parseRedisUrl } from "./_url.js";

describe("parseRedisUrl", () => {
  it("reads the seed nodes and the shared credentials of a cluster URL", () => {
    expect(parseRedisUrl("redis+cluster://127.0.0.1:7101,127.0.0.1:7102").cluster).toEqual({
      rootNodes: [{ url: "redis://127.0.0.1:7101" }, { url: "redis://127.0.0.1:7102" }],
    });
    expect(parseRedisUrl("rediss+cluster://app:p%40ss:w@a.example:6380,b.example:6380/").cluster).toEqual({
      rootNodes: [{ url: "rediss://a.example:6380" }, { url: "rediss://b.example:6380" }],
      username: "app",
      password: "p@ss:w",
    });
    expect(parseRedisUrl("redis+cluster://:secret@h:1").cluster).toEqual({
      rootNodes: [{ url: "redis://h:1" }],
      password: "secret",
    });
    expect(parseRedisUrl("redis+cluster://h:1,[::1]:7000").where).toBe("cluster h:1,[::1]:7000");
  });

  it("reads a single server's address and database", () => {
    expect(parseRedisUrl("redis://127.0.0.1:6379/6")).toEqual({
      where: "127.0.0.1:6379",
      database: 6,
      clientUrl: "redis://127.0.0.1:6379/6",
    });
    expect(parseRedisUrl("rediss://user:pw@h:6380")).toEqual({ where: "h:6380", clientUrl: "rediss://user:pw@h:6380" });
    expect(parseRedisUrl("redis://h/")).toEqual({ where: "h", clientUrl: "redis://h/" });
    expect(parseRedisUrl("redis://")).toEqual({ where: "localhost", clientUrl: "redis://" });
  });

  it("reads the replica acknowledgement parameters, and connects without them", () => {
    expect(parseRedisUrl("redis://h:6379/2?wait=1&wait_timeout=250")).toEqual({
      where: "h:6379",
      database: 2,
      waitReplicas: 1,
      waitTimeoutMs: 250,
      clientUrl: "redis://h:6379/2",
    });
    expect(parseRedisUrl("redis+cluster://h:1,h:2?wait=2")).toMatchObject({
      waitReplicas: 2,
      clientUrl: "redis://h:1",
    });
    expect(parseRedisUrl("redis+cluster://h:1/?wait_timeout=50")).toMatchObject({ waitTimeoutMs: 50 });
    expect(parseRedisUrl("redis://h?wait=0").waitReplicas).toBe(0);
  });

  it.each([
    ["redis+cluster://h:1/0", '/db path, got "/0"'],
    ["redis+cluster://h:1,h:2/3?x=1", '/db path, got "/3"'],
    ["redis+cluster://h:1?x=1&y=2", "only the parameters wait, wait_timeout, got ?x, y"],
    ["redis+cluster://h:1/?x=1", "only the parameters wait, wait_timeout, got ?x"],
    ["redis+cluster://h:1#top", "no #fragment"],
    ["redis+cluster://", "at least one node"],
    ["redis+cluster://u:p@ , ", "at least one node"],
    ["redis+cluster://h:1,h:port", 'Not a host[:port] in a redis+cluster:// URL: "h:port"'],
    ["redis+cluster://h:99999", 'Not a host[:port] in a redis+cluster:// URL: "h:99999"'],
    ["redis+cluster://:50%@h:1", "not valid percent-encoding"],
    ["redis://h:6379?x=1", "only the parameters wait, wait_timeout, got ?x"],
    ["redis://h:6379/0?password=secret", "only the parameters wait, wait_timeout, got ?password"],
    ["redis://h:6379#x", "no #fragment"],
    ["redis://h:6379?wait=one", 'wait takes a number of replicas (0-100), got "one"'],
    ["redis://h:6379?wait=-1", 'got "-1"'],
    ["redis://h:6379?wait=1&wait=2", '"wait" is given twice'],
    ["redis+cluster://h:1?wait_timeout=0", 'wait_timeout takes a time in ms (1-600000), got "0"'],
    ["redis+cluster://h:1?wait=1&timeout=5", "got ?timeout"],
    ["redis://h:6379/abc", 'database number (e.g. /0), got "/abc"'],
    ["redis://h:6379/-1", 'got "/-1"'],
    ["redis://h:6379/0/x", 'got "/0/x"'],
    ["redis://h:99999", "Not a valid Redis URL"],
    ["redis://:50%@h", "not valid percent-encoding"],
    ["http://h:6379", 'Not a Redis URL scheme "http:"'],
  ])("refuses %s with invalid_store_url, naming what is wrong", (url, says) => {
    let thrown: unknown;
    try {
      parseRedisUrl(url);
    } catch (error) {
      thrown = error;
    }
    expect(isThreadkeepError(thrown, "invalid_store_url")).toBe(true);
    expect((thrown as Error).message).toContain(says);
    expect((thrown as Error).message).not.toContain("secret");
  });
});
