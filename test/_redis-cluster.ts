/**
 * A real Redis Cluster for tests: three masters (`redis-server --cluster-enabled yes`) on free
 * 127.0.0.1 ports, joined with `redis-cli --cluster create`, stopped and removed afterwards. Outside
 * CI a missing `redis-server` skips with a printed reason; under CI=true it fails the run.
 */
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { createClient, type RedisClientType } from "redis";
import { redisServerAvailable, startRedisServers } from "./_redis-server.js";

const run = promisify(execFile);

/** A running cluster. */
export interface RedisCluster {
  ports: number[];
  /** `redis+cluster://127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3`. */
  url: string;
  stop(): Promise<void>;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** `true` when `redis-server` and `redis-cli` run; otherwise why not (thrown under CI=true). */
export function clusterAvailable(): true | string {
  return redisServerAvailable("the Redis Cluster tests", ["redis-server", "redis-cli"]);
}

/** Starts three masters and joins them into one cluster covering all 16384 slots. */
export async function startRedisCluster(): Promise<RedisCluster> {
  const dir = mkdtempSync(join(tmpdir(), "threadkeep-redis-cluster-"));
  // Ports found free may be taken before a server binds them: then all three start again on new ones.
  const servers = await startRedisServers(
    3,
    (port) => [
      "--cluster-enabled", "yes",
      "--cluster-config-file", join(dir, `nodes-${port}.conf`),
      "--cluster-node-timeout", "5000",
      "--dir", dir,
      "--save", "",
      "--appendonly", "no",
    ],
    { bus: true },
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
    await run("redis-cli", ["--cluster", "create", ...ports.map((p) => `127.0.0.1:${p}`), "--cluster-replicas", "0", "--cluster-yes"]);
    // Every node must know the whole slot map before a client discovers it from any of them.
    for (const port of ports) {
      for (let i = 0; ; i++) {
        if ((await cli(port, "CLUSTER", "INFO")).stdout.includes("cluster_state:ok")) break;
        if (i > 200) throw new Error(`the cluster did not settle on port ${port}`);
        await sleep(50);
      }
    }
    return { ports, url: `redis+cluster://${ports.map((p) => `127.0.0.1:${p}`).join(",")}`, stop };
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
