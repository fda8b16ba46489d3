/**
 * `redis-server` processes of a test's own on free 127.0.0.1 ports. A port found free can be taken
 * before the server binds it (by another test starting servers too): a server that cannot bind exits,
 * and all of them are started again on new ports.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { freePorts } from "./_ports.js";

/** Servers this process started and that still run: a worker that exits without stop() (a hook's time-out) kills them. */
const running = new Set<ChildProcess>();
process.once("exit", () => {
  for (const server of running) server.kill("SIGKILL");
});

/** Servers that are up and listening. */
export interface RedisServers {
  ports: number[];
  /** Kills the server at `index` with SIGKILL (a crash) and resolves once it has exited. */
  kill(index: number): Promise<void>;
  /** Sends `signal` to the server at `index` (SIGSTOP, SIGCONT to freeze and thaw it). */
  signal(index: number, signal: NodeJS.Signals): void;
  /** Starts the server at `index` again, with its arguments, on its port; resolves once it listens. */
  restart(index: number): Promise<void>;
  stop(): Promise<void>;
}

/** `true` when `redis-server` (and `redis-cli`, when asked) run; otherwise why not (thrown under CI=true). */
export function redisServerAvailable(what: string, bins: string[] = ["redis-server"]): true | string {
  const missing = bins.filter((bin) => spawnSync(bin, ["--version"]).status !== 0);
  if (missing.length === 0) return true;
  const reason = `${missing.join(" and ")} not found on PATH (install Redis 7 to run ${what})`;
  if (process.env.CI === "true") throw new Error(`CI=true and ${reason}`);
  return reason;
}

function stopAll(servers: ChildProcess[]): Promise<void> {
  return Promise.all(
    servers.map(
      (server) =>
        new Promise<void>((resolve) => {
          if (server.exitCode !== null || server.signalCode !== null) return resolve();
          server.once("exit", () => resolve());
          // A server a test froze (SIGSTOP) would not act on SIGTERM.
          server.kill("SIGCONT");
          server.kill("SIGTERM");
        }),
    ),
  ).then(() => {});
}

/** Resolves true once the server says it accepts connections, false when it exits first. */
function listening(server: ChildProcess, port: number): Promise<boolean> {
  return new Promise((resolve, reject) => {
    let output = "";
    const timer = setTimeout(
      () => reject(new Error(`redis-server on port ${port} did not start: ${output.slice(-500)}`)),
      10_000,
    );
    const done = (ok: boolean) => {
      clearTimeout(timer);
      resolve(ok);
    };
    server.stdout!.on("data", (chunk) => {
      output += chunk;
      if (output.includes("Ready to accept connections")) done(true);
    });
    server.once("exit", () => done(false));
  });
}

/** How {@link startRedisServers} finds its ports. */
export interface PortOptions {
  /** The cluster bus ports (port + 10000) must be free too. @default false */
  bus?: boolean;
  /** Picks `count` ports; tests of this helper hand out a taken one. @default free consecutive ports */
  pick?: (count: number) => Promise<number[]>;
  /** The first and last port the free consecutive ports are picked from (see `_ports.ts`). @default [21000, 26999] */
  range?: [number, number];
}

/**
 * Starts `count` servers, `args(port)` each (`--port` and `--bind 127.0.0.1` are added), on free
 * ports (consecutive; with their bus ports free too when `bus`), trying new ports up to 5 times when
 * one of them cannot bind.
 */
export async function startRedisServers(
  count: number,
  args: (port: number) => string[],
  options: PortOptions = {},
): Promise<RedisServers> {
  const pick =
    options.pick ?? ((n: number) => freePorts(n, options.range ?? [21_000, 26_999], options.bus ? 10_000 : undefined));
  const start = (port: number) => {
    const server = spawn("redis-server", ["--port", String(port), "--bind", "127.0.0.1", ...args(port)], {
      stdio: ["ignore", "pipe", "ignore"],
    });
    running.add(server);
    server.once("exit", () => running.delete(server));
    return server;
  };
  for (let attempt = 1; ; attempt++) {
    const ports = await pick(count);
    const servers = ports.map(start);
    const up = await Promise.all(servers.map((server, i) => listening(server, ports[i]))).catch(async (error) => {
      await stopAll(servers);
      throw error;
    });
    if (up.every(Boolean)) {
      return {
        ports,
        kill: async (index) => {
          const server = servers[index];
          if (server.exitCode !== null || server.signalCode !== null) return;
          await new Promise<void>((resolve) => {
            server.once("exit", () => resolve());
            server.kill("SIGKILL");
          });
        },
        signal: (index, signal) => {
          servers[index].kill(signal);
        },
        restart: async (index) => {
          servers[index] = start(ports[index]);
          if (!(await listening(servers[index], ports[index])))
            throw new Error(`redis-server could not bind port ${ports[index]} again`);
        },
        stop: () => stopAll(servers),
      };
    }
    await stopAll(servers);
    if (attempt === 5) throw new Error(`redis-server could not bind free ports 5 times (last ${ports.join(", ")})`);
  }
}
