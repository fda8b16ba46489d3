/**
 * Redis store URLs: a malformed one is refused when the store is opened (`invalid_store_url`, naming
 * what is wrong), as SQLite and PostgreSQL refuse their bad parameters; one the server refuses (a
 * database it does not have, a cluster URL naming a server without cluster support) fails the first
 * operation at once with the server's words, as PostgreSQL does for a missing database, instead of
 * waiting out the connect timeout and calling the server unreachable.
 */
import { createClient } from "redis";
import { describe, expect, it } from "vitest";
import { isStoreRefusal, isThreadkeepError } from "../../src/core/errors.js";
import { newSessionId } from "../../src/core/ids.js";
import { createRedisStore } from "../../src/stores/redis/index.js";
import { timedFailure } from "../_timed-failure.js";
import { createStore } from "../../src/stores/url.js";
import { serviceAvailable, TEST_REDIS_URL } from "../_services.js";

const enabled = await serviceAvailable("redis");

describe("redis store URLs: malformed ones are refused at open", () => {
  it.each([
    ["redis+cluster://127.0.0.1:7000/0", '/db path, got "/0"'],
    ["redis+cluster://127.0.0.1:7000,127.0.0.1:7001?x=1", "only the parameters wait, wait_timeout, got ?x"],
    ["redis://127.0.0.1:6379?x=1", "only the parameters wait, wait_timeout, got ?x"],
    ["redis://127.0.0.1:6379/zero", 'database number (e.g. /0), got "/zero"'],
    ["redis://127.0.0.1:65536", "Not a valid Redis URL"],
  ])("%s: invalid_store_url naming what is wrong", async (url, says) => {
    for (const open of [() => createStore(url), async () => createRedisStore({ url })]) {
      const { error } = await timedFailure(open);
      expect(isThreadkeepError(error, "invalid_store_url"), String(error)).toBe(true);
      expect(error.message).toContain(says);
    }
  });
});

describe.skipIf(enabled !== true)("redis store URLs the server refuses", () => {
  it("fails the first operation at once on a database number out of range, saying which", async () => {
    const raw = createClient({ url: TEST_REDIS_URL });
    await raw.connect();
    const { databases } = await raw.configGet("databases");
    await raw.close();
    const url = new URL(TEST_REDIS_URL);
    url.pathname = `/${databases}`;
    // A connect timeout long enough that waiting it out could not pass for failing at once: failing at
    // once is failing within half of it (3.3 s measured once at a load average of 27 on 2 cores,
    // well under 1 s idle).
    const connectTimeoutMs = 10_000;
    const store = createRedisStore({ url: url.toString(), connectTimeoutMs });
    try {
      for (const call of [
        () => store.getSession(newSessionId()),
        () => store.createSession({ id: newSessionId(), userId: "u" }),
      ]) {
        const { error, ms } = await timedFailure(call);
        expect(isThreadkeepError(error, "store_unavailable"), String(error)).toBe(true);
        // Not an outage: the server turns a proxied turn into store_misconfigured, not a degraded answer.
        expect(isStoreRefusal(error)).toBe(true);
        expect(error.message).toContain("DB index is out of range");
        expect(error.message).toContain(`database ${databases}`);
        expect(ms).toBeLessThan(connectTimeoutMs / 2);
      }
    } finally {
      await store.close();
    }
  });

  it("fails the first operation at once on a cluster URL naming a server without cluster support", async () => {
    const { host } = new URL(TEST_REDIS_URL);
    const store = await createStore(`redis+cluster://${host}`);
    try {
      const { error, ms } = await timedFailure(() => store.getSession(newSessionId()));
      expect(isStoreRefusal(error), String(error)).toBe(true);
      expect(error.message).toContain("cluster support disabled");
      expect(ms).toBeLessThan(3_000);
    } finally {
      await store.close();
    }
  });
});

describe.skipIf(enabled !== true)("redis store URL ?wait=N on a server without replicas", () => {
  it("refuses each write after wait_timeout, its outcome unknown, and reads without waiting", async () => {
    // The test server has no replica, so no write can be confirmed by one.
    const plain = await createStore(TEST_REDIS_URL, { ttlMs: 0 });
    const waiting = await createStore(`${TEST_REDIS_URL}?wait=1&wait_timeout=50`, { ttlMs: 0 });
    try {
      const session = await plain.createSession({ id: newSessionId(), userId: "wait" });
      await plain.appendMessages(session.id, [{ role: "user", content: "stored" }]);

      const refused = await waiting.appendMessages(session.id, [{ role: "user", content: "unconfirmed" }]).then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(isThreadkeepError(refused, "store_unavailable")).toBe(true);
      expect((refused as { details?: unknown }).details).toEqual({ outcome: "unknown" });
      expect((refused as Error).message).toContain(
        "0 of the 1 replicas it waits for acknowledged within 50 ms (wait=1)",
      );
      // It applied on the server: "unknown" is the honest outcome.
      expect((await plain.getMessages(session.id)).map((m) => m.content)).toEqual(["stored", "unconfirmed"]);

      // Reads wait for no replica (one that did would fail here, as the write did).
      expect((await waiting.getMessages(session.id, { last: 1 })).map((m) => m.content)).toEqual(["unconfirmed"]);
      expect(await waiting.getState(session.id)).toMatchObject({ version: 0 });
      expect((await waiting.getSession(session.id))?.userId).toBe("wait");
      await plain.deleteSession(session.id);
    } finally {
      await Promise.all([plain.close(), waiting.close()]);
    }
  });
});
