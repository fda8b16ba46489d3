/**
 * A real Redis Cluster for tests: three masters (`redis-server --cluster-enabled yes`) on free
 * 127.0.0.1 ports, joined with `redis-cli --cluster create`, stopped and removed afterwards. Outside
 * CI a missing `redis-server` skips with a printed reason; under CI=true it fails the run.
 */
import { type ChildProcess, execFile, spawn, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

/** A running cluster. */
export interface RedisCluster {
  ports: number[];
  /** `redis+cluster://127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3`. */
  url: string;
  stop(): Promise<void>;
}

function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", () => resolve(false));
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
  });
}

/** Three ports whose cluster bus ports (port + 10000) are free too. */
async function freePorts(): Promise<number[]> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const base = 21_000 + Math.floor(Math.random() * 8_000);
    const ports = [base, base + 1, base + 2];
    const all = [...ports, ...ports.map((p) => p + 10_000)];
    if ((await Promise.all(all.map(portFree))).every(Boolean)) return ports;
  }
  throw new Error("no free ports for a Redis Cluster");
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** `true` when `redis-server` and `redis-cli` run; otherwise why not (thrown under CI=true). */
export function clusterAvailable(): true | string {
  const missing = ["redis-server", "redis-cli"].filter((bin) => spawnSync(bin, ["--version"]).status !== 0);
  if (missing.length === 0) return true;
  const reason = `${missing.join(" and ")} not found on PATH (install Redis 7 to run the Redis Cluster tests)`;
  if (process.env.CI === "true") throw new Error(`CI=true and ${reason}`);
  return reason;
}

/** Starts three masters and joins them into one cluster covering all 16384 slots. */
export async function startRedisCluster(): Promise<RedisCluster> {
  const ports = await freePorts();
  const dir = mkdtempSync(join(tmpdir(), "threadkeep-redis-cluster-"));
  const servers: ChildProcess[] = ports.map((port) =>
    spawn(
      "redis-server",
      [
        "--port", String(port),
        "--bind", "127.0.0.1",
        "--cluster-enabled", "yes",
        "--cluster-config-file", join(dir, `nodes-${port}.conf`),
        "--cluster-node-timeout", "5000",
        "--dir", dir,
        "--save", "",
        "--appendonly", "no",
      ],
      { stdio: "ignore" },
    ),
  );
  const stop = async () => {
    await Promise.all(
      servers.map(
        (server) =>
          new Promise<void>((resolve) => {
            if (server.exitCode !== null || server.signalCode !== null) return resolve();
            server.once("exit", () => resolve());
            server.kill("SIGTERM");
          }),
      ),
    );
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
