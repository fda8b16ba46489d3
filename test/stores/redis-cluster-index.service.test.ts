/**
 * On a Redis Cluster every session write updates the session indexes (the owner's and the global
 * activity index, in other hash slots) in a second step. Here the node holding the owner's index
 * refuses writes for a moment (`min-replicas-to-write 1` on a master without replicas: it answers
 * NOREPLICAS): the writes still succeed, each failure is reported with its session id, the next
 * write of a session repairs its entry itself, and the others are repaired in the background.
 */
import { randomUUID } from "node:crypto";
import type { RedisClientType } from "redis";
import { afterAll, describe, expect, it } from "vitest";
import { newSessionId } from "../../src/core/ids.js";
import { createRedisStore } from "../../src/stores/redis/index.js";
import { clusterAvailable, connectClusterMasters, type RedisCluster, startRedisCluster } from "../_redis-cluster.js";
import { expectRetryNeverMovesBack } from "./_redis-index-retry.js";

const enabled = clusterAvailable();
const cluster: RedisCluster | undefined = enabled === true ? await startRedisCluster() : undefined;
afterAll(async () => {
  await cluster?.stop();
});
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe.skipIf(enabled !== true)("redis cluster: the index node refuses writes for a moment", () => {
  it("keeps every write, reports each session, and the next write or the background retry repairs the index", async () => {
    const keyPrefix = `tk-test-${randomUUID()}:`;
    const warnings: string[] = [];
    const store = createRedisStore({ url: cluster!.url, keyPrefix, ttlMs: 0, onWarning: (m) => warnings.push(m) });
    const masters = await connectClusterMasters(cluster!);
    const { nodeOf } = masters;
    try {
      const owner = `owner-${randomUUID()}`;
      const ownerIndex = `${keyPrefix}u:${owner}:sessions`;
      const indexNode = await nodeOf(ownerIndex);
      // Sessions held by the other masters, so that only their index step meets the refusal.
      const elsewhere = async () => {
        for (;;) {
          const id = newSessionId();
          if ((await nodeOf(`{${id}}`)) !== indexNode) return id;
        }
      };
      const [a, b, c] = [await elsewhere(), await elsewhere(), await elsewhere()];
      for (const id of [a, b]) {
        await store.createSession({ id, userId: owner });
        await store.appendMessages(id, [{ role: "user", content: "before" }]);
      }
      const score = async (id: string) => Number(await indexNode.zScore(ownerIndex, id));
      const activity = async (id: string) => (await store.getSession(id))!.lastActivityAt;
      const before = { a: await score(a), b: await score(b) };
      expect(before).toEqual({ a: await activity(a), b: await activity(b) });
      expect(warnings).toEqual([]);

      await indexNode.configSet("min-replicas-to-write", "1");
      let refusing = true;
      try {
        await expect(indexNode.zAdd(ownerIndex, { score: 0, value: "probe" })).rejects.toThrow(/NOREPLICAS/);
        await sleep(5);
        const [added] = await store.appendMessages(a, [{ role: "assistant", content: "during" }]);
        expect(added.seq).toBe(2);
        await sleep(5);
        expect((await store.appendMessages(b, [{ role: "assistant", content: "during" }]))[0].seq).toBe(2);
        await sleep(5);
        await store.createSession({ id: c, userId: owner });
        expect(await store.getSession(c)).toMatchObject({ id: c, userId: owner });
        for (const id of [a, b, c]) expect(warnings.filter((w) => w.includes(id)).length).toBeGreaterThanOrEqual(1);
        // The index still places the sessions by their activity before the refusal, and lacks c.
        expect({ a: await score(a), b: await score(b) }).toEqual(before);
        expect(await indexNode.zScore(ownerIndex, c)).toBeNull();
        // Long enough for the background retries to fail and back off a few times.
        await sleep(1_500);
        await indexNode.configSet("min-replicas-to-write", "0");
        refusing = false;
        const refusedWarnings = warnings.length;

        // The next write of a session records its activity as it returns, before any retry is due.
        await store.appendMessages(a, [{ role: "user", content: "after" }]);
        expect(await score(a)).toBe(await activity(a));
        // The others catch up in the background.
        const deadline = Date.now() + 15_000;
        while ((await score(b)) !== (await activity(b)) || (await indexNode.zScore(ownerIndex, c)) === null) {
          if (Date.now() > deadline) throw new Error("the index was not repaired in the background");
          await sleep(50);
        }
        expect(await score(c)).toBe(await activity(c));
        expect((await store.listSessions(owner)).sessions.map((s) => s.id)).toEqual([a, c, b]);
        expect(warnings.length).toBe(refusedWarnings);
        expect((await store.getMessages(b)).map((m) => m.content)).toEqual(["before", "during"]);
        expect((await store.getMessages(a)).map((m) => m.content)).toEqual(["before", "during", "after"]);
      } finally {
        if (refusing) await indexNode.configSet("min-replicas-to-write", "0");
      }
    } finally {
      await store.close();
      await masters.close();
    }
  }, 60_000);

  it("retries without moving a session back behind another process's newer write, or bringing back a deleted one", async () => {
    const keyPrefix = `tk-test-${randomUUID()}:`;
    const warnings: string[] = [];
    const a = createRedisStore({ url: cluster!.url, keyPrefix, ttlMs: 0, onWarning: (m) => warnings.push(m) });
    const b = createRedisStore({ url: cluster!.url, keyPrefix, ttlMs: 0 });
    const masters = await connectClusterMasters(cluster!);
    const { nodeOf } = masters;
    let refusing: RedisClientType | undefined;
    try {
      let indexNode: RedisClientType | undefined;
      await expectRetryNeverMovesBack({
        a,
        b,
        keyPrefix,
        warnings,
        // Sessions held by the other masters, so that only their index step meets the refusal.
        newId: async () => {
          for (;;) {
            const id = newSessionId();
            if ((await nodeOf(`{${id}}`)) !== indexNode) return id;
          }
        },
        refuse: async (key) => {
          refusing = await nodeOf(key);
          await refusing.configSet("min-replicas-to-write", "1");
        },
        allow: async () => {
          await refusing!.configSet("min-replicas-to-write", "0");
          refusing = undefined;
        },
        zScore: async (key, member) => (await nodeOf(key)).zScore(key, member),
        ownerIndexKnown: async (key) => {
          indexNode = await nodeOf(key);
        },
      });
    } finally {
      if (refusing) await refusing.configSet("min-replicas-to-write", "0");
      await Promise.all([a.close(), b.close()]);
      await masters.close();
    }
  }, 60_000);
});
