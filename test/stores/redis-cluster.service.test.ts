/**
 * The Redis store on a real Redis Cluster (three masters started by this file on ports of its own):
 * the whole conformance suite, the two-process turn order, and proof that sessions really spread
 * over the nodes while each session's keys stay in one slot.
 */
import { randomUUID } from "node:crypto";
import { createClient } from "redis";
import { afterAll, describe, expect, it } from "vitest";
import { newSessionId } from "../../src/core/ids.js";
import { createRedisStore } from "../../src/stores/redis/index.js";
import { createStore } from "../../src/stores/url.js";
import { runStoreConformance } from "../../src/testing/index.js";
import { clusterAvailable, type RedisCluster, startRedisCluster } from "../_redis-cluster.js";
import { expectTwoProcessTurnOrder } from "./_two-process-turns.js";

const enabled = clusterAvailable();
const cluster: RedisCluster | undefined = enabled === true ? await startRedisCluster() : undefined;
afterAll(async () => {
  await cluster?.stop();
});
const keyPrefix = `tk-test-${randomUUID()}:`;
const open = () => createRedisStore({ url: cluster!.url, keyPrefix, ttlMs: 0 });

runStoreConformance("redis cluster", open, {
  enabled,
  withTtl: (ttlMs) => createRedisStore({ url: cluster!.url, keyPrefix, ttlMs }),
});

describe.skipIf(enabled !== true)("redis store on a Redis Cluster", () => {
  it("spreads sessions over the masters and keeps each session's keys on one of them", async () => {
    // Opened by URL, as `--store redis+cluster://…` does.
    const store = await createStore(cluster!.url, { ttlMs: 0 });
    const nodes = cluster!.ports.map((port) => createClient({ url: `redis://127.0.0.1:${port}` }));
    try {
      await Promise.all(nodes.map((node) => node.connect()));
      const before = await Promise.all(nodes.map((node) => node.dbSize()));
      const ids: string[] = [];
      for (let i = 0; i < 12; i++) {
        const session = await store.createSession({ id: newSessionId(), userId: "spread" });
        await store.appendMessages(session.id, [{ role: "user", content: `hello ${i}` }]);
        await store.setState(session.id, { i }, 0);
        ids.push(session.id);
      }
      const grown = (await Promise.all(nodes.map((node) => node.dbSize()))).map((n, k) => n - before[k]);
      expect(grown.filter((n) => n > 0).length).toBeGreaterThanOrEqual(2);
      for (const id of ids) {
        // KEYS answers for the node asked only (no redirection): exactly one node holds the session.
        const held = await Promise.all(nodes.map((node) => node.keys(`threadkeep:s:{${id}}:*`)));
        expect(held.filter((keys) => keys.length > 0)).toHaveLength(1);
        expect(held.flat().sort()).toEqual([
          `threadkeep:s:{${id}}:meta`,
          `threadkeep:s:{${id}}:msgs`,
          `threadkeep:s:{${id}}:state`,
        ]);
      }
      expect((await store.listSessions("spread", { limit: 50 })).sessions).toHaveLength(12);
      for (const id of ids) await store.deleteSession(id);
    } finally {
      await store.close();
      await Promise.all(nodes.map((node) => node.close()));
    }
  });

  it("serialises 2 processes × 100 concurrent turns: contiguous seq, each turn adjacent, none lost or duplicated", async () => {
    const store = open();
    try {
      const session = await store.createSession({ id: newSessionId(), userId: "hammer" });
      const recipe = {
        module: "src/stores/redis/index.ts",
        factory: "createRedisStore",
        options: { url: cluster!.url, keyPrefix, ttlMs: 0 },
      };
      await expectTwoProcessTurnOrder(store, recipe, session.id);
    } finally {
      await store.close();
    }
  }, 60_000);
});
