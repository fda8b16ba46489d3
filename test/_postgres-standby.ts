/**
 * A PostgreSQL primary and a streaming standby of a test's own: `initdb` a primary in a temporary
 * directory, `pg_basebackup -R` a standby from it, both on free loopback ports (15000-16999, see
 * `_ports.ts`; started again on new ones when a port is taken before a server binds it), stopped and
 * removed afterwards. Run as the current user, or as `postgres` when that is root (PostgreSQL refuses
 * to run as root). Outside CI missing binaries skip with a printed reason; under CI=true they fail.
 */
import { type ChildProcess, execFileSync, spawn, spawnSync } from "node:child_process";
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import postgres from "postgres";
import { freePorts } from "./_ports.js";
import { until } from "./_wait.js";

const BINARIES = ["initdb", "postgres", "pg_basebackup"];

/** Debian's server binaries, newest version first. */
function debianBinDirs(): string[] {
  const versions = existsSync("/usr/lib/postgresql") ? readdirSync("/usr/lib/postgresql") : [];
  return versions.sort((a, b) => Number(b) - Number(a)).map((version) => `/usr/lib/postgresql/${version}/bin`);
}

/** Where the server binaries are (`pg_config --bindir`, else Debian's), or why they cannot be used. */
function binDir(): string | { reason: string } {
  const found = spawnSync("pg_config", ["--bindir"], { encoding: "utf8" });
  const candidates = [...(found.status === 0 ? [found.stdout.trim()] : []), ...debianBinDirs()];
  const dir =
    candidates.find((candidate) => BINARIES.every((bin) => existsSync(join(candidate, bin)))) ?? candidates[0] ?? "";
  const missing = BINARIES.filter((bin) => !dir || !existsSync(join(dir, bin)));
  if (missing.length > 0)
    return {
      reason: `${missing.join(", ")} not found (looked in ${dir || "pg_config --bindir and /usr/lib/postgresql/*/bin"}; install PostgreSQL's server and client packages)`,
    };
  if (process.getuid?.() === 0 && spawnSync("id", ["-u", "postgres"]).status !== 0)
    return { reason: "running as root and there is no postgres user to run PostgreSQL as" };
  return dir;
}

/** Servers this process started and that still run: a worker that exits without stop() (a hook's time-out) kills them. */
const running = new Set<ChildProcess>();
process.once("exit", () => {
  for (const server of running) server.kill("SIGKILL");
});

/** `true` when a primary and a standby can be started; otherwise why not (thrown under CI=true). */
export function standbyAvailable(what: string): true | string {
  const dir = binDir();
  if (typeof dir === "string") return true;
  const reason = `${dir.reason}, needed by ${what}`;
  if (process.env.CI === "true") throw new Error(`CI=true and ${reason}`);
  return reason;
}

/** A running primary and standby. */
export interface PostgresPair {
  primaryPort: number;
  standbyPort: number;
  /** `postgres://postgres@127.0.0.1:<primary>/postgres`, and the same for the standby. */
  primaryUrl: string;
  standbyUrl: string;
  /** Kills the primary and its backends with SIGKILL (a crash) and resolves once it has exited. */
  killPrimary(): Promise<void>;
  /** Freezes (SIGSTOP) the standby's WAL receiver, so that it confirms nothing; resolves to a function that thaws it. */
  freezeStandby(): Promise<() => void>;
  /** Promotes the standby (`pg_promote()`) and resolves once it accepts writes. */
  promoteStandby(): Promise<void>;
  stop(): Promise<void>;
}

/** What {@link startPostgresPair} starts. */
export interface PostgresPairOptions {
  /** The primary waits for the standby's flush before a commit returns (`synchronous_standby_names = '*'`). @default false */
  synchronous?: boolean;
}

/** The processes whose parent is `pid` (a postmaster's backends, WAL sender and receiver: each is a process group of its own). */
function childrenOf(pid: number): number[] {
  const children: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // The fields after the command's closing parenthesis: state, then the parent's pid.
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      if (Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]) === pid) children.push(Number(entry));
    } catch {
      // Gone meanwhile.
    }
  }
  return children;
}

/** Resolves once `url` answers `SELECT 1`. */
async function answers(url: string): Promise<boolean> {
  const sql = postgres(url, { max: 1, connect_timeout: 2, onnotice: () => {} });
  try {
    await sql`SELECT 1`;
    return true;
  } catch {
    return false;
  } finally {
    await sql.end({ timeout: 0 });
  }
}

/** A server that exited before it answered: most likely its port was taken after it was found free. */
class ServerExited extends Error {}

/** A pair's directory older than this is an earlier run's that never stopped it (a test lasts a minute). */
const STALE_AFTER_MS = 10 * 60_000;

/**
 * Kills the servers an earlier run left behind (its worker killed before its `stop()` ran) and removes
 * their directories: they would hold ports and memory, and a primary whose backends wait for a
 * vanished synchronous standby does not stop on SIGTERM.
 */
function reapStalePairs(): void {
  for (const name of readdirSync(tmpdir())) {
    if (!name.startsWith("threadkeep-pg-standby-")) continue;
    const dir = join(tmpdir(), name);
    try {
      if (Date.now() - statSync(dir).mtimeMs < STALE_AFTER_MS) continue;
      for (const data of ["primary", "standby"]) {
        const pidFile = join(dir, data, "postmaster.pid");
        if (!existsSync(pidFile)) continue;
        const pid = Number(readFileSync(pidFile, "utf8").split("\n")[0]);
        if (Number.isSafeInteger(pid) && pid > 0) {
          try {
            process.kill(pid, "SIGKILL");
          } catch {
            // Gone already.
          }
        }
      }
      rmSync(dir, { recursive: true, force: true });
    } catch {
      // Another run's directory, removed meanwhile.
    }
  }
}

/**
 * Starts a primary, takes a standby from it with `pg_basebackup`, and waits until it streams; on new
 * ports (up to 5 times) when a server exits before it answers.
 */
export async function startPostgresPair(options: PostgresPairOptions = {}): Promise<PostgresPair> {
  const bin = binDir();
  if (typeof bin !== "string") throw new Error(bin.reason);
  reapStalePairs();
  for (let attempt = 1; ; attempt++) {
    const [primaryPort, standbyPort] = await freePorts(2, [15_000, 16_999]);
    try {
      return await startPair(bin, primaryPort, standbyPort, options.synchronous ?? false);
    } catch (error) {
      if (!(error instanceof ServerExited) || attempt === 5) throw error;
    }
  }
}

/** Waits until `url` answers, or throws {@link ServerExited} when `server` exits first. */
async function answersOrExits(what: string, server: ChildProcess, url: string): Promise<void> {
  let exited = false;
  const onExit = () => {
    exited = true;
  };
  server.once("exit", onExit);
  try {
    await until(what, async () => exited || (await answers(url)), { timeoutMs: 20_000, everyMs: 100 });
    if (exited) throw new ServerExited(`${what}: the server exited first (its port taken?)`);
  } finally {
    server.off("exit", onExit);
  }
}

async function startPair(
  bin: string,
  primaryPort: number,
  standbyPort: number,
  synchronous: boolean,
): Promise<PostgresPair> {
  const root = process.getuid?.() === 0;
  const user = root
    ? { uid: Number(execFileSync("id", ["-u", "postgres"])), gid: Number(execFileSync("id", ["-g", "postgres"])) }
    : {};
  const dir = mkdtempSync(join(tmpdir(), "threadkeep-pg-standby-"));
  if (root) chownSync(dir, user.uid!, user.gid!);
  const run = (name: string, args: string[]) => {
    const done = spawnSync(join(bin, name), args, {
      ...user,
      encoding: "utf8",
      env: { ...process.env, PGCONNECT_TIMEOUT: "5" },
    });
    if (done.status !== 0) throw new Error(`${name} failed: ${done.stderr || done.stdout}`);
  };
  const servers: ChildProcess[] = [];
  /** WAL receivers frozen and not yet thawed (thawed before the servers stop). */
  const frozen: number[] = [];
  // Only the primary waits for a standby: the promoted standby has none (a failover manager would
  // clear the setting, or commits there would wait for ever).
  const start = (data: string, port: number, synchronous: boolean) => {
    const server = spawn(
      join(bin, "postgres"),
      [
        "-D",
        data,
        "-p",
        String(port),
        "-k",
        dir,
        "-c",
        "listen_addresses=127.0.0.1",
        // A test server: no fsync (its own crash is not what is tested; a replica's flush still is the ack).
        "-c",
        "fsync=off",
        "-c",
        "shared_buffers=16MB",
        "-c",
        "max_connections=40",
        "-c",
        "max_wal_senders=4",
        "-c",
        "wal_level=replica",
        "-c",
        `synchronous_standby_names=${synchronous ? "*" : ""}`,
        "-c",
        "logging_collector=off",
        "-c",
        "log_min_messages=fatal",
      ],
      { ...user, stdio: "ignore" },
    );
    servers.push(server);
    // A worker that exits without stop() (a hook's time-out) must not leave a server holding the ports.
    running.add(server);
    server.once("exit", () => running.delete(server));
    return server;
  };
  const stop = async () => {
    for (const pid of frozen.splice(0)) process.kill(pid, "SIGCONT");
    await Promise.all(
      servers.map(
        (server) =>
          new Promise<void>((resolve) => {
            if (server.exitCode !== null || server.signalCode !== null) return resolve();
            server.once("exit", () => resolve());
            // Immediate shutdown: nothing of these servers is kept.
            server.kill("SIGQUIT");
          }),
      ),
    );
    rmSync(dir, { recursive: true, force: true });
  };
  const url = (port: number) => `postgres://postgres@127.0.0.1:${port}/postgres`;
  try {
    run("initdb", [
      "-D",
      join(dir, "primary"),
      "-U",
      "postgres",
      "--auth=trust",
      "--no-sync",
      "-E",
      "UTF8",
      "--locale=C",
    ]);
    const primary = start(join(dir, "primary"), primaryPort, synchronous);
    await answersOrExits("the primary answers", primary, url(primaryPort));
    run("pg_basebackup", [
      "-h",
      "127.0.0.1",
      "-p",
      String(primaryPort),
      "-U",
      "postgres",
      "-D",
      join(dir, "standby"),
      "-R",
      "-X",
      "stream",
      "--no-sync",
    ]);
    const standby = start(join(dir, "standby"), standbyPort, false);
    await answersOrExits("the standby answers", standby, url(standbyPort));
    const check = postgres(url(primaryPort), { max: 1, onnotice: () => {} });
    try {
      const state = synchronous ? "sync" : "async";
      await until(
        `the standby streams (${state})`,
        async () =>
          (await check`SELECT 1 FROM pg_stat_replication WHERE state = 'streaming' AND sync_state = ${state}`)
            .length === 1,
        { timeoutMs: 20_000, everyMs: 100 },
      );
    } finally {
      await check.end({ timeout: 0 });
    }
    return {
      primaryPort,
      standbyPort,
      primaryUrl: url(primaryPort),
      standbyUrl: url(standbyPort),
      killPrimary: () =>
        new Promise<void>((resolve) => {
          if (primary.exitCode !== null || primary.signalCode !== null) return resolve();
          primary.once("exit", () => resolve());
          // The machine gone: its backends and WAL sender too, not only the postmaster.
          const children = childrenOf(primary.pid!);
          primary.kill("SIGKILL");
          for (const child of children) {
            try {
              process.kill(child, "SIGKILL");
            } catch {
              // Exited already.
            }
          }
        }),
      freezeStandby: async () => {
        const sql = postgres(url(standbyPort), { max: 1, onnotice: () => {} });
        let pid: number;
        try {
          [{ pid }] = await sql<{ pid: number }[]>`SELECT pid FROM pg_stat_wal_receiver`;
        } finally {
          await sql.end({ timeout: 0 });
        }
        process.kill(pid, "SIGSTOP");
        frozen.push(pid);
        return () => {
          process.kill(pid, "SIGCONT");
          frozen.splice(frozen.indexOf(pid), 1);
        };
      },
      promoteStandby: async () => {
        const sql = postgres(url(standbyPort), { max: 1, onnotice: () => {} });
        try {
          await sql`SELECT pg_promote(true, 30)`;
        } finally {
          await sql.end({ timeout: 0 });
        }
      },
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}
