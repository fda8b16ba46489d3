/**
 * A Redis server that requires a password the store URL does not give, or gives wrongly, refuses the
 * connection (NOAUTH, WRONGPASS): that is not an outage. The first operation fails at once as a
 * refusal saying so, instead of waiting out the connect timeout and calling the server unreachable,
 * and a proxied turn answers 503 `store_misconfigured`. The test starts its own `redis-server
 * --requirepass` (outside CI a missing `redis-server` skips with a reason; under CI=true it fails).
 */
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isStoreRefusal, isThreadkeepError } from "../../src/core/errors.js";
import { newSessionId } from "../../src/core/ids.js";
import { createRedisStore } from "../../src/stores/redis/index.js";
import { timedFailure } from "../_timed-failure.js";
import { type RedisServers, redisServerAvailable, startRedisServers } from "../_redis-server.js";
import { startServe } from "../../src/cli/serve.js";
import { resolveConfig } from "../../src/cli/options.js";
import { startStack } from "../server/_stack.js";

const available = redisServerAvailable("the Redis password tests");
if (available !== true) console.warn(`skipping the Redis password tests: ${available}`);
const PASSWORD = "s3cret-Pa55";

describe.skipIf(available !== true)("a Redis server that requires a password", () => {
  let server: RedisServers;
  let url: (auth: string, path?: string) => string;
  beforeAll(async () => {
    server = await startRedisServers(1, () => ["--requirepass", PASSWORD, "--save", "", "--appendonly", "no"]);
    url = (auth, path = "") => `redis://${auth}127.0.0.1:${server.ports[0]}${path}`;
  }, 30_000);
  afterAll(async () => {
    await server?.stop();
  });

  it.each([
    // Unauthenticated, a script's long argument list is a protocol error rather than NOAUTH.
    ["no password", "", "", /NOAUTH|unauthenticated/],
    ["no password, a database", "", "/0", /NOAUTH|unauthenticated/],
    ["a wrong password", ":wrong-one@", "/0", /WRONGPASS/],
    ["a wrong user", "nobody:wrong-one@", "", /WRONGPASS/],
  ])("%s: the first operation fails at once as a refusal naming it", async (_, auth, path, reply) => {
    // A connect timeout long enough that waiting it out could not pass for failing at once.
    const store = createRedisStore({ url: url(auth, path), connectTimeoutMs: 10_000 });
    try {
      // Once to load the client, then at once.
      await timedFailure(() => store.getSession(newSessionId()));
      for (const call of [
        () => store.getSession(newSessionId()),
        () => store.createSession({ id: newSessionId(), userId: "u" }),
      ]) {
        const { error, ms } = await timedFailure(call);
        expect(isThreadkeepError(error, "store_unavailable"), String(error)).toBe(true);
        expect(isStoreRefusal(error), String(error)).toBe(true);
        expect(error.message).toMatch(reply);
        expect(error.message).toContain("password in the store URL");
        expect(error.message).not.toContain("wrong-one");
        expect(ms).toBeLessThan(2_000);
      }
    } finally {
      await store.close();
    }
  });

  it("works with the right password", async () => {
    const store = createRedisStore({ url: url(`:${PASSWORD}@`, "/0") });
    try {
      const session = await store.createSession({ id: newSessionId(), userId: "u" });
      expect((await store.getSession(session.id))?.id).toBe(session.id);
    } finally {
      await store.close();
    }
  });

  it("answers a proxied turn 503 store_misconfigured, before any model call", async () => {
    const stack = await startStack({ store: createRedisStore({ url: url(":wrong-one@"), connectTimeoutMs: 10_000 }) });
    try {
      const started = Date.now();
      const res = await stack.request("POST", "/v1/chat/completions", {
        headers: { "x-session-id": randomUUID() },
        body: { model: "fake", messages: [{ role: "user", content: "hello" }] },
      });
      const body = (await res.json()) as { error: { code: string; message: string } };
      expect(res.status).toBe(503);
      expect(body.error.code).toBe("store_misconfigured");
      expect(body.error.message).toContain("WRONGPASS");
      expect(Date.now() - started).toBeLessThan(5_000);
      expect(stack.fake.chatRequests()).toHaveLength(0);
    } finally {
      await stack.close();
    }
  }, 20_000);

  it("threadkeep serve says at start that the store refused the connection, not that it is unreachable", async () => {
    const written: string[] = [];
    const write = process.stderr.write.bind(process.stderr);
    process.stderr.write = ((chunk: string) => (written.push(String(chunk)), true)) as typeof process.stderr.write;
    try {
      const server = await startServe(resolveConfig({ store: url(":wrong-one@"), port: "0" }), () => {});
      await server.close();
    } finally {
      process.stderr.write = write;
    }
    const said = written.join("");
    expect(said).toContain("the store refused the connection");
    expect(said).toContain("WRONGPASS");
    expect(said).toContain("503 store_misconfigured");
    expect(said).not.toContain("wrong-one");
  }, 20_000);
});
