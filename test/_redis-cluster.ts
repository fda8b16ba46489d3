/**
 * A real Redis Cluster for tests: three masters (`redis-server --cluster-enabled yes`), and a replica
 * of each when asked, on free 127.0.0.1 ports, joined with `redis-cli --cluster create`, stopped and
 * removed afterwards. Outside CI a missing `redis-server` skips with a printed reason; under CI=true
 * it fails the run.
 */
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { createClient, type RedisClientType } from "redis";
import { type RedisServers, redisServerAvailable, startRedisServers } from "./_redis-server.js";

const run = promisify(execFile);

/** A running cluster. */
export interface RedisCluster {
  /** Every node's port: the three masters first, then their replicas (the replica of `ports[i]` is `ports[i + 3]`). */
  ports: number[];
  /** `redis+cluster://127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3` (the masters). */
  url: string;
  /** The nodes' processes, indexed as `ports`, to crash and start again. */
  servers: Pick<RedisServers, "kill" | "signal" | "restart">;
  stop(): Promise<void>;
}

/** What {@link startRedisCluster} starts. */
export interface RedisClusterOptions {
  /** One replica per master (six nodes). @default false */
  replicas?: boolean;
  /** `cluster-node-timeout`: how long a node is unreachable before it is failed over. @default 5000 */
  nodeTimeoutMs?: number;
  /** `cluster-require-full-coverage`: whether all nodes refuse while some slots have no node. @default true (Redis's default) */
  requireFullCoverage?: boolean;
  /** The first and last client port to pick from (the bus ports are 10000 above). @default the helper's own range */
  portRange?: [number, number];
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** `true` when `redis-server` and `redis-cli` run; otherwise why not (thrown under CI=true). */
export function clusterAvailable(): true | string {
  return redisServerAvailable("the Redis Cluster tests", ["redis-server", "redis-cli"]);
}

/**
 * Starts three masters (and a replica of each with `replicas`) and joins them into one cluster
 * covering all 16384 slots; resolves once every node sees the cluster as ok and every replica is in sync.
 */
export async function startRedisCluster(options: RedisClusterOptions = {}): Promise<RedisCluster> {
  const dir = mkdtempSync(join(tmpdir(), "threadkeep-redis-cluster-"));
  const count = options.replicas ? 6 : 3;
  // Ports found free may be taken before a server binds them: then all of them start again on new ones.
  const servers = await startRedisServers(
    count,
    (port) => [
      "--cluster-enabled",
      "yes",
      "--cluster-config-file",
      join(dir, `nodes-${port}.conf`),
      "--cluster-node-timeout",
      String(options.nodeTimeoutMs ?? 5000),
      "--cluster-require-full-coverage",
      options.requireFullCoverage === false ? "no" : "yes",
      "--dir",
      dir,
      "--save",
      "",
      "--appendonly",
      "no",
      // A replica (re)joining syncs at once, not after the default 5 s wait for more replicas.
      "--repl-diskless-sync-delay",
      "0",
    ],
    { bus: true, ...(options.portRange ? { range: options.portRange } : {}) },
  ).catch((error) => {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  });
  const { ports } = servers;
  const stop = async () => {
    await servers.stop();
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const cli = (port: number, ...args: string[]) => run("redis-cli", ["-h", "127.0.0.1", "-p", String(port), ...args]);
    for (const port of ports) {
      for (let i = 0; ; i++) {
        if ((await cli(port, "PING").catch(() => ({ stdout: "" }))).stdout.trim() === "PONG") break;
        if (i > 100) throw new Error(`redis-server on port ${port} did not start`);
        await sleep(50);
      }
    }
    // redis-cli makes the first three nodes masters and gives each a replica of another master; the
    // replicas are moved below, so that the replica of ports[i] is ports[i + 3].
    await run("redis-cli", [
      "--cluster",
      "create",
      ...ports.slice(0, 3).map((p) => `127.0.0.1:${p}`),
      "--cluster-replicas",
      "0",
      "--cluster-yes",
    ]);
    if (options.replicas) {
      const ids = await Promise.all(
        ports.slice(0, 3).map(async (port) => (await cli(port, "CLUSTER", "MYID")).stdout.trim()),
      );
      // Each replica meets every master itself. A master ignores pings from a node it does not know,
      // and it hears of a replica only through another node's gossip: a replica met through ports[0]
      // alone was unknown to the other masters when a test killed ports[0] a second after the start,
      // and a master does not vote for a replica it does not know, so no promotion ever came (4 of 11
      // runs of the failover test alone on the idle machine).
      for (let i = 0; i < 3; i++) {
        for (const master of ports.slice(0, 3)) await cli(ports[i + 3], "CLUSTER", "MEET", "127.0.0.1", String(master));
      }
      for (let i = 0; i < 3; i++) {
        // A node must know its master before it can replicate it: MEET spreads by gossip.
        for (let k = 0; ; k++) {
          if (
            (
              await cli(ports[i + 3], "CLUSTER", "REPLICATE", ids[i]).catch((error) => ({ stdout: String(error) }))
            ).stdout.trim() === "OK"
          )
            break;
          if (k > 200) throw new Error(`the node on port ${ports[i + 3]} did not become a replica`);
          await sleep(50);
        }
      }
    }
    // Every node must know the whole slot map before a client discovers it from any of them, every other
    // node (a master votes only for a replica it knows), and a replica that has not synced could not be
    // promoted.
    for (const port of ports) {
      for (let i = 0; ; i++) {
        const info = (await cli(port, "CLUSTER", "INFO")).stdout;
        const ok = info.includes("cluster_state:ok") && info.includes(`cluster_known_nodes:${ports.length}`);
        const synced =
          ports.indexOf(port) < 3 || (await cli(port, "INFO", "replication")).stdout.includes("master_link_status:up");
        if (ok && synced) break;
        if (i > 200) throw new Error(`the cluster did not settle on port ${port}`);
        await sleep(50);
      }
    }
    return {
      ports,
      url: `redis+cluster://${ports
        .slice(0, 3)
        .map((p) => `127.0.0.1:${p}`)
        .join(",")}`,
      servers,
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** Plain clients on the masters of a cluster, for reaching the node that holds a key. */
export interface ClusterMasters {
  /** The master holding `key`'s slot, as the cluster's slot map said when they were connected. */
  nodeOf(key: string): Promise<RedisClientType>;
  close(): Promise<void>;
}

/** Connects a plain client to each master of `cluster` and reads its slot map. */
export async function connectClusterMasters(cluster: RedisCluster): Promise<ClusterMasters> {
  const nodes = cluster.ports.map((port) => createClient({ url: `redis://127.0.0.1:${port}` }) as RedisClientType);
  const close = async () => {
    await Promise.all(nodes.map((node) => (node.isOpen ? node.close() : undefined)));
  };
  try {
    await Promise.all(nodes.map((node) => node.connect()));
    const slotOwners = (await nodes[0].sendCommand(["CLUSTER", "SLOTS"])) as [number, number, [string, number]][];
    return {
      nodeOf: async (key) => {
        const slot = Number(await nodes[0].sendCommand(["CLUSTER", "KEYSLOT", key]));
        const port = slotOwners.find(([from, to]) => slot >= from && slot <= to)![2][1];
        return nodes[cluster.ports.indexOf(port)];
      },
      close,
    };
  } catch (error) {
    await close();
    throw error;
  }
}
