/**
 * Slow clients: does a normal chat turn still answer while thousands of idle connections and a
 * slowloris hold the server, how long until the tricklers are cut, and what it costs in memory.
 * threadkeep (SQLite store, slow-client bounds at their defaults unless `BENCH_SLOW_CLIENTS` gives
 * JSON `ClientLimits`) and a lean fake upstream run in their own processes. This process:
 *
 * 1. times normal turns on a quiet server (one keep-alive connection, turns one after another);
 * 2. opens `BENCH_SLOW_IDLE` (3000) connections that send nothing, and `BENCH_SLOW_TRICKLERS` (50)
 *    whose request headers trickle in one line a second;
 * 3. times normal turns meanwhile, until every trickler and idle connection is cut (or 60 s),
 *    sampling the server's RSS;
 * 4. reports the turn latency before and during, when the tricklers were cut (from their first byte)
 *    and what they received, how many idle connections are still open, and RSS before, peak and after.
 *
 * Each connection is a file descriptor on both sides: `ulimit -n` must exceed idle + tricklers + 100.
 */
import { randomUUID } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { Agent } from "node:http";
import { connect, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { post, startChild } from "./_child.js";
import { formatMicros, percentile, printTable } from "./_harness.js";
import { startLeanUpstream } from "./_raw-http.js";

const ROLE = process.env.BENCH_PROXY_ROLE;
const IDLE = Number(process.env.BENCH_SLOW_IDLE ?? 3000);
const TRICKLERS = Number(process.env.BENCH_SLOW_TRICKLERS ?? 50);
const BASELINE_TURNS = 300;
const GIVE_UP_MS = 60_000;

async function runServer(): Promise<void> {
  const { createServer } = await import("../src/server/index.js");
  const server = await createServer({
    memory: { store: process.env.BENCH_STORE as string },
    upstream: process.env.BENCH_UPSTREAM as string,
    clients: JSON.parse(process.env.BENCH_SLOW_CLIENTS || "{}"),
    port: 0,
  });
  await server.memory.store();
  process.stdout.write(`READY ${await server.listen()}\n`);
  process.once("SIGTERM", () => server.close().then(() => process.exit(0)));
}

const rssMiB = (pid: number) =>
  Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? 0) / 1024;

/** Opens a connection and resolves once it is connected, with when it closed (Infinity while open). */
function openConnection(url: URL): Promise<{ socket: Socket; closedAt: () => number; received: () => string }> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: url.hostname, port: Number(url.port) });
    let closedAt = Number.POSITIVE_INFINITY;
    let text = "";
    socket.on("data", (d) => (text += d.toString("latin1")));
    socket.on("close", () => (closedAt = performance.now()));
    socket.on("error", () => {});
    socket.once("connect", () => resolve({ socket, closedAt: () => closedAt, received: () => text }));
    socket.once("error", reject);
  });
}

/** Normal chat turns one after another until `until()` says stop; latencies in µs. */
async function turns(
  agent: Agent,
  url: URL,
  until: (done: number) => boolean,
): Promise<{ samples: number[]; failed: number }> {
  const samples: number[] = [];
  let failed = 0;
  const headers = { "x-session-id": randomUUID() };
  for (let i = 0; !until(i); i++) {
    const body = `{"model":"fake","messages":[{"role":"user","content":"Turn ${i}: what did I say before?"}]}`;
    try {
      samples.push(await post(agent, url, body, headers));
    } catch {
      failed++;
    }
  }
  return { samples: samples.sort((a, b) => a - b), failed };
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "threadkeep-bench-slow-"));
  const upstream = await startLeanUpstream();
  const script = fileURLToPath(import.meta.url);
  const { child, url: base } = await startChild(script, "server", {
    BENCH_STORE: `sqlite:${join(dir, "bench.db")}`,
    BENCH_UPSTREAM: upstream.url,
  });
  const pid = child.pid as number;
  const url = new URL(base);
  const chat = new URL("/v1/chat/completions", url);
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const held: Socket[] = [];
  try {
    await turns(agent, chat, (i) => i >= 1000); // warm-up: the first turns pay for JIT compilation
    const quiet = await turns(agent, chat, (i) => i >= BASELINE_TURNS);
    const rssBefore = rssMiB(pid);

    const openStart = performance.now();
    const idle: (Awaited<ReturnType<typeof openConnection>> & { openedAt: number })[] = [];
    // In batches: the listen backlog (511) would otherwise overflow and connections retry a second later.
    for (let i = 0; i < IDLE; i += 200) {
      const batch = await Promise.all(Array.from({ length: Math.min(200, IDLE - i) }, () => openConnection(url)));
      const openedAt = performance.now();
      idle.push(...batch.map((c) => ({ ...c, openedAt })));
      held.push(...batch.map((c) => c.socket));
    }
    const openMs = performance.now() - openStart;

    const trickleStart = performance.now();
    const tricklers = await Promise.all(Array.from({ length: TRICKLERS }, () => openConnection(url)));
    held.push(...tricklers.map((c) => c.socket));
    for (const t of tricklers) t.socket.write(`POST /v1/chat/completions HTTP/1.1\r\nhost: ${url.host}\r\n`);
    let line = 0;
    const timer = setInterval(() => {
      line++;
      for (const t of tricklers) if (!t.socket.destroyed) t.socket.write(`x-trickle-${line}: ${"z".repeat(20)}\r\n`);
    }, 1000);

    let rssPeak = rssBefore;
    const sampler = setInterval(() => (rssPeak = Math.max(rssPeak, rssMiB(pid))), 250);
    const allCut = () => [...tricklers, ...idle].every((t) => t.closedAt() !== Number.POSITIVE_INFINITY);
    const loaded = await turns(agent, chat, () => allCut() || performance.now() - trickleStart > GIVE_UP_MS);
    clearInterval(timer);
    clearInterval(sampler);
    const rssDuring = rssMiB(pid);

    const cutAfter = tricklers.map((t) => t.closedAt() - trickleStart).sort((a, b) => a - b);
    const stillOpen = cutAfter.filter((ms) => ms === Number.POSITIVE_INFINITY).length;
    const answered408 = tricklers.filter((t) => /^HTTP\/1\.1 408 /.test(t.received())).length;
    // The idle ones were opened first; give their closes a moment to arrive here, then time each from its own opening.
    for (let waited = 0; waited < 5000 && idle.some((c) => c.closedAt() === Number.POSITIVE_INFINITY); waited += 100)
      await new Promise((r) => setTimeout(r, 100));
    const idleCut = idle.map((c) => c.closedAt() - c.openedAt).sort((a, b) => a - b);
    const idleOpen = idleCut.filter((ms) => ms === Number.POSITIVE_INFINITY).length;
    const idleAnswered = idle
      .filter((c) => /^HTTP\/1\.1 (\d+) /.exec(c.received())?.[1])
      .map((c) => c.received().slice(9, 12));
    const statuses =
      [...new Set(idleAnswered)]
        .map((code) => `${idleAnswered.filter((c) => c === code).length}× ${code}`)
        .join(", ") || "none";

    for (const socket of held) socket.destroy();
    held.length = 0;
    await new Promise((r) => setTimeout(r, 1000));
    const afterTurns = await turns(agent, chat, (i) => i >= BASELINE_TURNS);
    const rssAfter = rssMiB(pid);

    console.log(
      `${IDLE} idle connections (opened in ${(openMs / 1000).toFixed(1)} s) + ${TRICKLERS} tricklers (one header line a second); limits: ${process.env.BENCH_SLOW_CLIENTS || "defaults"}\n`,
    );
    const row = (name: string, r: { samples: number[]; failed: number }) => [
      name,
      String(r.samples.length),
      String(r.failed),
      formatMicros(percentile(r.samples, 50)),
      formatMicros(percentile(r.samples, 90)),
      formatMicros(percentile(r.samples, 99)),
    ];
    printTable(
      ["normal turns", "answered", "failed", "p50", "p90", "p99"],
      [row("quiet server", quiet), row("under the slowloris", loaded), row("after (connections closed)", afterTurns)],
    );
    console.log("");
    const s = (ms: number) => (ms === Number.POSITIVE_INFINITY ? "still open" : `${(ms / 1000).toFixed(1)} s`);
    printTable(
      ["cut after (from first byte / opening)", "count", "first", "median", "last", "still open", "answered"],
      [
        [
          "tricklers",
          String(TRICKLERS),
          s(cutAfter[0]),
          s(percentile(cutAfter, 50)),
          s(cutAfter[cutAfter.length - 1]),
          String(stillOpen),
          `${answered408}× 408`,
        ],
        [
          "idle connections",
          String(IDLE),
          s(idleCut[0]),
          s(percentile(idleCut, 50)),
          s(idleCut[idleCut.length - 1]),
          String(idleOpen),
          statuses,
        ],
      ],
    );
    console.log("");
    printTable(
      ["server RSS", "quiet", "peak under load", "end of load", "after"],
      [["MiB", rssBefore.toFixed(0), rssPeak.toFixed(0), rssDuring.toFixed(0), rssAfter.toFixed(0)]],
    );
  } finally {
    for (const socket of held) socket.destroy();
    agent.destroy();
    child.kill("SIGTERM");
    await new Promise((r) => child.once("exit", r));
    upstream.server.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (ROLE === "server") await runServer();
else await main();
