/**
 * A session write whose separate index step fails after the write applied (appends with no owner
 * given, and every write on Redis Cluster, update the session indexes in a second step): the write
 * still succeeds, the failure is reported with the session id, and the index is repaired in the
 * background. The index step is made to fail for real: a value of another type at the owner's index key.
 */
import { randomUUID } from "node:crypto";
import { createClient } from "redis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createMemory } from "../../src/create-memory.js";
import { newSessionId } from "../../src/core/ids.js";
import { createRedisStore } from "../../src/stores/redis/index.js";
import { serviceAvailable, TEST_REDIS_URL } from "../_services.js";
import { expectRetryNeverMovesBack } from "./_redis-index-retry.js";

const enabled = await serviceAvailable("redis");
const keyPrefix = `tk-test-${randomUUID()}:`;

describe.skipIf(enabled !== true)("redis: an index update that fails after its write applied", () => {
  const raw = createClient({ url: TEST_REDIS_URL });
  const warnings: string[] = [];
  const store = createRedisStore({ url: TEST_REDIS_URL, keyPrefix, ttlMs: 0, onWarning: (m) => warnings.push(m) });
  const memory = createMemory({ store, ttlMs: 0 });

  beforeAll(async () => {
    await raw.connect();
  });
  afterAll(async () => {
    await memory.close();
    for await (const keys of raw.scanIterator({ MATCH: `${keyPrefix}*`, COUNT: 1000 }))
      if (keys.length > 0) await raw.del(keys);
    await raw.close();
  });

  it("does not fail the write, says which session, and the listing catches up once the index can be written", async () => {
    const owner = `owner-${randomUUID()}`;
    const id = newSessionId();
    await store.createSession({ id, userId: owner });
    const ownerIndex = `${keyPrefix}u:${owner}:sessions`;
    await raw.del(ownerIndex);
    await raw.set(ownerIndex, "not a sorted set");

    // The store called directly without an owner: the index is a second step after the script.
    const [first] = await store.appendMessages(id, [{ role: "user", content: "one" }]);
    expect(first.seq).toBe(1);
    expect(warnings.filter((w) => w.includes(id))).toHaveLength(1);
    // Through Memory with an owner (the script indexes itself on a single Redis, and falls back).
    const [second] = await memory.addMessages(id, [{ role: "assistant", content: "two" }], { userId: owner });
    expect(second.seq).toBe(2);
    expect(warnings.filter((w) => w.includes(id)).length).toBeGreaterThanOrEqual(2);
    // A session created while the index is broken exists all the same. Created a millisecond or more
    // after the append, so "newest first" below has one answer: at the same millisecond (a run on a
    // fast machine, 2026-12-07) the listing orders the two by id, as it promises for ties.
    while (Date.now() <= second.createdAt) await new Promise((r) => setTimeout(r, 1));
    const other = await memory.startSession({ userId: owner });
    expect((await memory.getMessages(id, { userId: owner })).map((m) => m.content)).toEqual(["one", "two"]);
    await expect(memory.listSessions({ userId: owner })).rejects.toMatchObject({ code: "store_corrupt" });

    // Repaired in the background once the index key can be written: both sessions, newest first.
    await raw.del(ownerIndex);
    const listed = async () => (await memory.listSessions({ userId: owner })).sessions.map((s) => s.id);
    const deadline = Date.now() + 5_000;
    while ((await listed()).length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(await listed()).toEqual([other.id, id]);
    const session = await memory.getSession(id, { userId: owner });
    expect(Number(await raw.zScore(ownerIndex, id))).toBe(session.lastActivityAt);
  });

  it("retries without moving a session back behind another process's newer write, or bringing back a deleted one", async () => {
    const a = createRedisStore({ url: TEST_REDIS_URL, keyPrefix, ttlMs: 0, onWarning: (m) => warnings.push(m) });
    const b = createRedisStore({ url: TEST_REDIS_URL, keyPrefix, ttlMs: 0 });
    try {
      await expectRetryNeverMovesBack({
        a,
        b,
        keyPrefix,
        warnings,
        newId: async () => newSessionId(),
        refuse: async (key) => {
          await raw.del(key);
          await raw.set(key, "not a sorted set");
        },
        allow: async (key) => {
          await raw.del(key);
        },
        zScore: (key, member) => raw.zScore(key, member),
      });
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  }, 30_000);
});
