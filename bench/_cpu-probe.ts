/**
 * Profiling helper (not part of `npm run bench`): the server CPU of proxied turns at 100 sessions,
 * chat and/or Responses, in windows one after another (the JIT compiler is busy through the first
 * few thousand turns, so later windows show the steady cost), split into the main thread and the
 * others. The same fake upstream and server roles as bench/proxy.ts.
 *
 *   npx tsx bench/_cpu-probe.ts                        chat then Responses, 3,000 turns each
 *   MODE=chat WINDOWS=4 TURNS=2000 npx tsx bench/_cpu-probe.ts
 *   DIST=dist CPU_PROF_DIR=/tmp/prof npx tsx bench/_cpu-probe.ts
 *
 * `DIST=<dir>` runs the server from compiled JavaScript (`npm run build`; a profile then has real
 * line numbers), `CPU_PROF_DIR` writes a `--cpu-prof` profile of the server there (read it with
 * `npx tsx bench/_cpuprofile-top.ts`), `SERVER_FLAGS` adds node flags, `STORE` picks the store URL
 * (default a fresh SQLite file), `THREADS=1` prints the CPU of each server thread, `WORKERS=2` runs the
 * server as `serve --workers 2` does (SQLite with its lease in the file; the CPU is then that of every
 * server process, the workers' threads listed with THREADS as `<pid>:<tid>`), warmed
 * WORKERS times as long (`WARMUP` turns of each API per worker, default 4,000: on a 2-vCPU VM the
 * windows settle only after ~8,000 turns, see docs/BENCHMARKS.md "Server CPU per SQLite turn").
 * Each window also prints the load generator's (this process) and the fake upstream's CPU per turn and
 * the machine's idle share (/proc/stat), so a window can be told CPU-bound or not, and whether other
 * processes took part of the machine ("cores busy" against what the bench's processes used).
 */
import type { ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { announce, forkWorkers, startChild, statCpuMicros } from "./_child.js";
import { RawConnection } from "./_raw-http.js";

const TURNS = Number(process.env.TURNS ?? 3000);
const SESSIONS = Number(process.env.SESSIONS ?? 100);
const MODE = process.env.MODE ?? "both";
const WINDOWS = Number(process.env.WINDOWS ?? 1);
const WARMUP = Number(process.env.WARMUP ?? 4000);
const WORKERS = Number(process.env.WORKERS ?? 1);

/** Child role with DIST: the server from compiled JavaScript, as bench/proxy.ts starts it from source. */
async function runDistServer(): Promise<void> {
  const workers = Number(process.env.BENCH_WORKERS ?? 1);
  if (forkWorkers(workers)) return;
  const entry = pathToFileURL(resolve(process.env.DIST as string, "server/index.js")).href;
  const { createServer } = (await import(entry)) as typeof import("../src/server/index.js");
  const store = process.env.BENCH_STORE as string;
  const shared = workers > 1 && store.startsWith("sqlite:") ? `${store}?lease=shared` : store;
  const server = await createServer({ memory: { store: shared }, upstream: process.env.BENCH_UPSTREAM, port: 0 });
  await server.memory.store();
  announce(await server.listen());
  process.once("SIGTERM", () => server.close().then(() => process.exit(0)));
}

/**
 * User and system CPU of each thread of a process and its children, in µs, by thread id (`main` for
 * the main thread of each process; a child's threads prefixed with its pid).
 */
function threadCpu(pid: number, prefix = ""): Map<string, number> {
  const byThread = new Map<string, number>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    byThread.set(`${prefix}${tid === String(pid) ? "main" : tid}`, statCpuMicros(`/proc/${pid}/task/${tid}/stat`));
  }
  let children: string[] = [];
  try {
    children = readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim().split(/\s+/).filter(Boolean);
  } catch {
    // The process ended.
  }
  for (const child of children) for (const [tid, micros] of threadCpu(Number(child), `${child}:`)) byThread.set(tid, micros);
  return byThread;
}

/** The machine's CPU time so far from /proc/stat, in clock ticks: all of it and the idle part (idle + iowait). */
function machineTicks(): { total: number; idle: number } {
  const fields = readFileSync("/proc/stat", "utf8").split("\n")[0].trim().split(/\s+/).slice(1, 9).map(Number);
  return { total: fields.reduce((a, b) => a + b, 0), idle: fields[3] + fields[4] };
}

/** The server (this script, with DIST) or the fake upstream (bench/proxy.ts's role) in a child process. */
function startRole(role: string, env: Record<string, string>, flags: string[] = []): Promise<{ child: ChildProcess; url: string }> {
  const dist = role === "server" && process.env.DIST;
  const script = dist ? fileURLToPath(import.meta.url) : fileURLToPath(new URL("./proxy.ts", import.meta.url));
  return startChild(script, role, { ...env, CPU_PROBE_ROLE: dist ? "server" : "" }, flags);
}

/** `total` turns over SESSIONS new sessions, each session's turns one after another (bench/proxy.ts's lean client); returns turns/s. */
async function drive(base: string, total: number, api: "chat" | "responses"): Promise<number> {
  const url = new URL(base);
  const path = `${url.pathname.replace(/\/$/, "")}/v1/${api === "chat" ? "chat/completions" : "responses"}`;
  const connections = await Promise.all(Array.from({ length: SESSIONS }, () => RawConnection.open(url)));
  const perSession = Math.ceil(total / SESSIONS);
  const start = performance.now();
  await Promise.all(
    connections.map(async (connection) => {
      const session = `X-Session-ID: ${randomUUID()}\r\n`;
      let previous = "";
      for (let i = 0; i < perSession; i++) {
        const input = `Turn ${i}: what did I say before?`;
        const response =
          api === "chat"
            ? await connection.post(path, `{"model":"fake","messages":[{"role":"user","content":"${input}"}]}`, session)
            : await connection.post(path, `{"model":"fake","input":"${input}"${previous ? `,"previous_response_id":"${previous}"` : ""}}`, "", true);
        if (response.status !== 200) throw new Error(`HTTP ${response.status}: ${response.body?.slice(0, 300)}`);
        if (api === "responses") previous = JSON.parse(response.body!).id;
      }
    }),
  );
  for (const connection of connections) connection.close();
  return (perSession * SESSIONS) / ((performance.now() - start) / 1000);
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "threadkeep-cpu-probe-"));
  const upstream = await startRole("upstream", {});
  const flags = [
    ...(process.env.CPU_PROF_DIR ? ["--cpu-prof", "--cpu-prof-dir", process.env.CPU_PROF_DIR] : []),
    ...(process.env.SERVER_FLAGS?.split(" ").filter(Boolean) ?? []),
  ];
  // `LEASE=shared` with one process: the lease in the file as with two workers, without the second process.
  const store = process.env.STORE ?? `sqlite:${join(dir, "threadkeep.db")}${process.env.LEASE && WORKERS === 1 ? `?lease=${process.env.LEASE}` : ""}`;
  const server = await startRole("server", { BENCH_STORE: store, BENCH_UPSTREAM: upstream.url, BENCH_WORKERS: String(WORKERS) }, flags);
  const base = server.url.replace(/\/v1$/, "");
  const pid = server.child.pid!;
  try {
    // Each worker sees 1/WORKERS of the turns: WORKERS times the warm-up warms each as one server.
    await drive(base, WARMUP * WORKERS, "chat");
    await drive(base, WARMUP * WORKERS, "responses");
    const apis = (["chat", "responses"] as const).filter((api) => MODE === "both" || MODE === api);
    for (const api of Array.from({ length: WINDOWS }, () => apis).flat()) {
      const before = threadCpu(pid);
      const bench = { client: process.cpuUsage(), upstream: statCpuMicros(`/proc/${upstream.child.pid}/stat`), machine: machineTicks() };
      const rate = await drive(base, TURNS, api);
      const after = threadCpu(pid);
      const client = process.cpuUsage(bench.client);
      const upstreamCpu = (statCpuMicros(`/proc/${upstream.child.pid}/stat`) - bench.upstream) / TURNS;
      const machine = machineTicks();
      const idle = (machine.idle - bench.machine.idle) / (machine.total - bench.machine.total);
      const perTurn = (tid: string) => ((after.get(tid) ?? 0) - (before.get(tid) ?? 0)) / TURNS;
      const all = [...after.keys()].reduce((sum, tid) => sum + perTurn(tid), 0);
      const mains = [...after.keys()].filter((tid) => tid.endsWith("main"));
      const mainCpu = mains.reduce((sum, tid) => sum + perTurn(tid), 0);
      const others = [...after.keys()].filter((tid) => !tid.endsWith("main") && perTurn(tid) > 0);
      const threads = process.env.THREADS ? ` [${others.map((tid) => `${tid}: ${Math.round(perTurn(tid))}`).join(", ")}]` : "";
      console.log(
        `${api}: ${Math.round(all)} µs/turn (main thread${mains.length > 1 ? "s" : ""} ${Math.round(mainCpu)}, others ${Math.round(all - mainCpu)}${threads}), ${Math.round(rate)} turns/s; ` +
          `load generator ${Math.round((client.user + client.system) / TURNS)}, upstream ${Math.round(upstreamCpu)} µs/turn; machine idle ${(idle * 100).toFixed(1)}% ` +
          `(cores busy ${((1 - idle) * cpus().length).toFixed(2)}, of them server + load generator + upstream ${(((all + (client.user + client.system) / TURNS + upstreamCpu) * rate) / 1e6).toFixed(2)})`,
      );
    }
  } finally {
    const exited = new Promise((resolve) => server.child.once("exit", resolve));
    server.child.kill("SIGTERM");
    await exited;
    upstream.child.kill("SIGTERM");
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.env.CPU_PROBE_ROLE === "server") await runDistServer();
else await main();
