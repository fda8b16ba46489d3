/**
 * Failover on a Redis Cluster with replicas: three masters and a replica of each, started by this file
 * (ports 17100-17199, `cluster-require-full-coverage no`, `cluster-node-timeout` 2 s: short for a
 * quick test, long enough that a node starved on a loaded machine is not failed over by mistake). A
 * master is killed with SIGKILL while every session writes: the sessions on the other masters never see an
 * error, and the dead master's sessions write again once its replica is promoted, within a bound.
 * With `wait=1` a write is acknowledged only once a replica holds it, so the failover loses none that
 * was (and a write no replica confirms fails instead of being acknowledged).
 *
 * `THREADKEEP_REPORT_FAILOVER=1` prints the measured times (docs/troubleshooting.md, "Failure modes").
 */
import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { createClient } from "redis";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { isThreadkeepError, type ThreadkeepError } from "../../src/core/errors.js";
import { newSessionId } from "../../src/core/ids.js";
import type { SessionStore } from "../../src/core/types.js";
import { createRedisStore } from "../../src/stores/redis/index.js";
import { clusterAvailable, type RedisCluster, startRedisCluster } from "../_redis-cluster.js";
import { until } from "../_wait.js";

const NODE_TIMEOUT_MS = 2_000;
/**
 * How long a promotion may take, from Redis Cluster's own timers (cluster.c) for this node timeout:
 * the dead master is PFAIL after `cluster-node-timeout`, FAIL once a majority of masters has said so
 * in gossip (nodes ping those they have not heard from for half the node timeout: another node
 * timeout allowed); its replica then waits 500-1000 ms (rank 0) and asks the masters for their votes.
 * An election that gets no majority within the auth timeout (twice the node timeout, at least 2 s) is
 * tried again only after twice that: on a busy machine a vote can come too late, so one failed election
 * is allowed, and the second one's auth timeout. Measured on the loaded project machine (load average
 * 4 to 28 on 2 cores): 3.8-5.5 s.
 */
const AUTH_TIMEOUT_MS = Math.max(2 * NODE_TIMEOUT_MS, 2_000);
const PROMOTION_BOUND_MS = 2 * NODE_TIMEOUT_MS + 1_000 + 2 * AUTH_TIMEOUT_MS + AUTH_TIMEOUT_MS;
/**
 * After the promotion, the dead master's sessions write again once the store has read the new slot
 * map: on its next reconnection attempt to the dead node (the store's defaults: at most 1 s apart,
 * plus 50 ms of jitter), with a connection and a CLUSTER SLOTS within the connect timeout (2 s), then
 * the write within the command timeout (5 s). With `wait=1` the restarted node must also learn its new
 * master by gossip (within a node timeout) and sync from it. Measured on the loaded project machine:
 * 0.5-2.0 s after the promotion.
 */
const BACK_AFTER_PROMOTION_MS = 1_050 + 2_000 + 5_000 + NODE_TIMEOUT_MS;
/**
 * `wait_timeout` of the `wait=1` store whose writes must succeed: the setup's, and the other shards'
 * under load. A healthy replica answers its master's REPLCONF GETACK when the kernel runs it; with
 * 300 ms a healthy replica missed it once in ten full runs on the 2-core machine (a `createSession` of
 * the setup, while the suite's other files ran). 2 s is scheduling delay no run here came near. A write
 * to the promoted master, which has no replica until the dead node is back, can wait that much more
 * before it succeeds, so `BACK_AFTER_PROMOTION_MS` grows by it for this store. The write that must be
 * refused (its replica frozen) goes through a store of its own with 300 ms, which keeps the freeze
 * well under the node timeout: a replica silent for a node timeout would be flagged as failing.
 */
const WAIT_TIMEOUT_MS = 2_000;
const report = (line: string) => {
  if (process.env.THREADKEEP_REPORT_FAILOVER) console.log(`[redis failover] ${line}`);
};

const enabled = clusterAvailable();
/**
 * Each test has a cluster of its own: a test that fails half-way (a node left dead, a replica left
 * frozen) must not leave the next one a cluster it cannot use.
 */
let cluster: RedisCluster | undefined;
// Six nodes joined and synced: 1-2 s on an idle machine, but 30 s was not enough once with the project
// machine's load average at 28 on 2 cores. The helper bounds each of its own waits (up to 10 s a
// node), so the hook leaves it room to say which step did not finish instead of cutting it short.
beforeEach(async () => {
  if (enabled === true) {
    cluster = await startRedisCluster({
      replicas: true,
      nodeTimeoutMs: NODE_TIMEOUT_MS,
      requireFullCoverage: false,
      portRange: [17_100, 17_199],
    });
  }
}, 120_000);
afterEach(async () => {
  await cluster?.stop();
  cluster = undefined;
});
const keyPrefix = `tk-failover-${randomUUID()}:`;

/**
 * A store on the cluster; the warnings it gives are kept in `warnings`: a session's owner index lives
 * in another slot, whose master may be the dead one while the session's own write succeeds.
 */
function openStore(warnings: string[], parameters = "") {
  return createRedisStore({
    url: `${cluster!.url}${parameters}`,
    keyPrefix,
    ttlMs: 0,
    onWarning: (message) => warnings.push(message),
  });
}

/** The only warning a failover may cause: an index update to retry (the write itself succeeded). */
function expectOnlyIndexRetries(warnings: string[]) {
  // One assertion over the list: an outage logs thousands, and an expect apiece held the loop ~0.5 s.
  expect(
    warnings.filter(
      (warning) => !/was written, but its index update failed \(retrying in the background\)/.test(warning),
    ),
  ).toEqual([]);
}

/** The failures of the dead master's sessions that are not `store_unavailable` (the outage's only kind), as text. */
const otherThanUnavailable = (victims: { failures: { error: ThreadkeepError }[] }[]) =>
  victims.flatMap((w) =>
    w.failures.filter(({ error }) => !isThreadkeepError(error, "store_unavailable")).map(({ error }) => String(error)),
  );

/** Resolves once the node on `port` replicates a master and is in sync with it. */
async function inSync(port: number): Promise<boolean> {
  const node = createClient({ url: `redis://127.0.0.1:${port}` });
  await node.connect();
  try {
    return String(await node.sendCommand(["INFO", "replication"])).includes("master_link_status:up");
  } finally {
    await node.close();
  }
}

/** One session written to in a loop: what was acknowledged, what failed and when. */
interface Writer {
  id: string;
  /** Index into `cluster.ports` of the master holding the session when the test started. */
  master: number;
  acked: string[];
  /** When each write of `acked` was acknowledged. */
  ackedAt: number[];
  failures: { at: number; error: ThreadkeepError }[];
  /** When the first write that succeeded after a failure was acknowledged. */
  backAt?: number;
}

/** `perMaster` new sessions on each master, with the master each is on. */
async function sessionsOnEachMaster(store: SessionStore, perMaster: number): Promise<Writer[]> {
  // The one node no test kills or demotes.
  const node = createClient({ url: `redis://127.0.0.1:${cluster!.ports[2]}` });
  await node.connect();
  try {
    const slots = (await node.sendCommand(["CLUSTER", "SLOTS"])) as [number, number, [string, number]][];
    const count = new Map(slots.map(([, , [, port]]) => [cluster!.ports.indexOf(port), 0]));
    const writers: Writer[] = [];
    while ([...count.values()].some((n) => n < perMaster)) {
      const id = newSessionId();
      const slot = Number(await node.sendCommand(["CLUSTER", "KEYSLOT", `{${id}}`]));
      const master = cluster!.ports.indexOf(slots.find(([from, to]) => slot >= from && slot <= to)![2][1]);
      if (count.get(master)! >= perMaster) continue;
      count.set(master, count.get(master)! + 1);
      await store.createSession({ id, userId: `failover-${id}` });
      writers.push({ id, master, acked: [], ackedAt: [], failures: [] });
    }
    return writers;
  } finally {
    await node.close();
  }
}

/** Writes to every session, one write after another per session, until `stop()`; a failure waits 20 ms. */
function writeUntil(store: SessionStore, writers: Writer[], stop: () => boolean): Promise<void> {
  return Promise.all(
    writers.map(async (writer) => {
      for (let i = 0; !stop(); i++) {
        const content = `${writer.id} #${i}`;
        try {
          await store.appendMessages(writer.id, [{ role: "user", content }]);
          writer.acked.push(content);
          writer.ackedAt.push(Date.now());
          if (writer.failures.length > 0 && writer.backAt === undefined) writer.backAt = Date.now();
        } catch (error) {
          writer.failures.push({ at: Date.now(), error: error as ThreadkeepError });
          writer.backAt = undefined;
          await sleep(20);
        }
      }
    }),
  ).then(() => {});
}

/** Whether the node on `port` is a master now. */
async function isMaster(port: number): Promise<boolean> {
  const node = createClient({ url: `redis://127.0.0.1:${port}` });
  await node.connect();
  try {
    return String(await node.sendCommand(["ROLE"]).then((role) => (role as unknown as string[])[0])) === "master";
  } finally {
    await node.close();
  }
}

/** Every acknowledged write of each session that the store no longer holds. */
async function lostWrites(store: SessionStore, writers: Writer[]): Promise<string[]> {
  const lost: string[] = [];
  for (const writer of writers) {
    const stored = new Set((await store.getMessages(writer.id)).map((m) => m.content));
    lost.push(...writer.acked.filter((content) => !stored.has(content)));
  }
  return lost;
}

/**
 * Kills master `victim` while every session writes; returns when the victim's sessions have all
 * written again (or the bound passed), with the times measured from the kill.
 */
async function killUnderLoad(
  store: SessionStore,
  writers: Writer[],
  victim: number,
  afterPromotion?: () => Promise<void>,
  backBoundMs = BACK_AFTER_PROMOTION_MS,
) {
  let stopped = false;
  const load = writeUntil(store, writers, () => stopped);
  await until("every session has written", () => writers.every((w) => w.acked.length >= 3));
  const killedAt = Date.now();
  await cluster!.servers.kill(victim);
  const replica = victim + 3;
  await until("the replica is promoted", () => isMaster(cluster!.ports[replica]), {
    timeoutMs: PROMOTION_BOUND_MS,
    everyMs: 25,
  });
  const promotedMs = Date.now() - killedAt;
  await afterPromotion?.();
  const victims = writers.filter((w) => w.master === victim);
  await until(
    "the dead master's sessions write again",
    () => victims.every((w) => w.failures.length > 0 && w.backAt !== undefined),
    {
      timeoutMs: backBoundMs,
    },
  )
    .catch((error: Error) => {
      // One run timed out here (2026-12-07, the whole suite on 2 cores) with nothing to tell why; alone,
      // every session fails 184–233 times and writes again 3.8–4.7 s after the kill. Say where each stood.
      const state = victims.map((w) => ({
        failures: w.failures.length,
        lastFailureAfterKillMs: (w.failures.at(-1)?.at ?? killedAt) - killedAt,
        lastError: w.failures.at(-1)?.error.message ?? null,
        backAfterKillMs: w.backAt === undefined ? null : w.backAt - killedAt,
        lastAckAfterKillMs: (w.ackedAt.at(-1) ?? killedAt) - killedAt,
      }));
      throw new Error(`${error.message} (promoted ${promotedMs} ms after the kill): ${JSON.stringify(state)}`);
    })
    .finally(() => {
      stopped = true;
    });
  await load;
  const backMs = Math.max(...victims.map((w) => w.backAt! - killedAt));
  return { killedAt, promotedMs, backMs, victims, others: writers.filter((w) => w.master !== victim) };
}

// A test waits for a cluster start, a promotion and a replica's resync (each bounded above).
describe("the Redis store when a Redis Cluster master fails over", { timeout: 90_000 }, () => {
  it("sessions on the other masters never notice; the dead master's write again after its replica's promotion", async (ctx) => {
    if (enabled !== true) return ctx.skip(enabled);
    const warnings: string[] = [];
    const store = openStore(warnings);
    try {
      const writers = await sessionsOnEachMaster(store, 4);
      const { killedAt, promotedMs, backMs, victims, others } = await killUnderLoad(store, writers, 0);

      for (const writer of others) expect(writer.failures).toEqual([]);
      // The outage is a store error the server turns into `not-saved` / `save-unconfirmed`, never another kind.
      expect(otherThanUnavailable(victims)).toEqual([]);
      expectOnlyIndexRetries(warnings);
      // Without `wait`, replication is asynchronous: what is lost is reported, not asserted (see the next test).
      const lost = await lostWrites(store, writers);
      const acked = writers.reduce((n, w) => n + w.acked.length, 0);
      report(
        `no wait: promoted after ${promotedMs} ms, every session of the dead master writing again after ${backMs} ms ` +
          `(failed writes per session: ${victims.map((w) => w.failures.length).join(", ")}); ` +
          `${acked} writes acknowledged, ${lost.length} of them lost; other masters' sessions: ${others.reduce((n, w) => n + w.acked.length, 0)} writes, 0 failures`,
      );

      // The dead node, started again, comes back as its old replica's replica.
      await cluster!.servers.restart(0);
      const restartedAt = Date.now();
      await until("the restarted node is a replica in sync", () => inSync(cluster!.ports[0]), {
        timeoutMs: PROMOTION_BOUND_MS,
      });
      expect(await isMaster(cluster!.ports[3])).toBe(true);
      report(
        `the restarted node was an in-sync replica ${Date.now() - restartedAt} ms after its start (${restartedAt - killedAt} ms after the kill)`,
      );
    } finally {
      await store.close();
    }
  });

  it("with wait=1 a write no replica confirms fails, and a failover loses no acknowledged write", async (ctx) => {
    if (enabled !== true) return ctx.skip(enabled);
    const victim = 1;
    const warnings: string[] = [];
    const store = openStore(warnings, `?wait=1&wait_timeout=${WAIT_TIMEOUT_MS}`);
    const strict = openStore(warnings, "?wait=1&wait_timeout=300");
    const plain = openStore(warnings);
    try {
      const writers = await sessionsOnEachMaster(store, 4);
      const frozen = writers.find((w) => w.master === victim)!;

      // The replica frozen (its master cannot reach it): without wait, the master alone acknowledges a
      // write; with it, the write fails, saying its outcome is unknown (it applied on the master).
      cluster!.servers.signal(victim + 3, "SIGSTOP");
      try {
        await plain.appendMessages(frozen.id, [{ role: "user", content: "acknowledged by the master alone" }]);
        const refused = await strict.appendMessages(frozen.id, [{ role: "user", content: "unconfirmed" }]).then(
          () => undefined,
          (error: unknown) => error,
        );
        expect(isThreadkeepError(refused, "store_unavailable")).toBe(true);
        expect((refused as ThreadkeepError).details).toMatchObject({ outcome: "unknown" });
        expect((refused as Error).message).toContain("0 of the 1 replicas");
      } finally {
        cluster!.servers.signal(victim + 3, "SIGCONT");
      }
      await until("the thawed replica confirms writes again", () =>
        store.appendMessages(frozen.id, [{ role: "user", content: "confirmed" }]).then(() => true),
      );

      // After the promotion the shard has no replica left, so its writes fail until the dead node
      // comes back as the new master's replica.
      let restartedAt = 0;
      const { killedAt, promotedMs, backMs, victims, others } = await killUnderLoad(
        store,
        writers,
        victim,
        async () => {
          await cluster!.servers.restart(victim);
          restartedAt = Date.now();
        },
        BACK_AFTER_PROMOTION_MS + WAIT_TIMEOUT_MS,
      );
      for (const writer of others)
        expect(writer.failures.map((f) => `master ${writer.master} ${f.at - killedAt} ms: ${f.error.message}`)).toEqual(
          [],
        );
      expect(otherThanUnavailable(victims)).toEqual([]);
      expect(await lostWrites(store, writers)).toEqual([]);
      expectOnlyIndexRetries(warnings);
      const acked = writers.reduce((n, w) => n + w.acked.length, 0);
      report(
        `wait=1: promoted after ${promotedMs} ms, dead node restarted ${restartedAt - killedAt} ms after the kill, ` +
          `every session of the dead master writing again after ${backMs} ms; ${acked} writes acknowledged, 0 lost`,
      );
    } finally {
      await Promise.all([store.close(), strict.close(), plain.close()]);
    }
  });
});
