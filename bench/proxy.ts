/**
 * Proxy benchmark: what threadkeep adds to a chat turn. A zero-latency fake OpenAI-compatible
 * upstream and the threadkeep server each run in their own process; this process drives them over
 * keep-alive HTTP, first straight at the upstream, then through threadkeep, at 1 and 100 concurrent
 * sessions (each session's turns one after another, as a chat client sends them), on SQLite and,
 * when reachable, PostgreSQL and Redis (and the in-memory store as a reference). Redis runs twice:
 * as it is (a turn in two round trips: `openTurn` and a commit that releases the lease) and "call by
 * call" (its `combinedTurn` hidden, so the turn takes the lease, reads, writes and releases in
 * separate calls, as every store did before), back to back, then compared in alternating rounds
 * (bench/_proxy-redis.ts). Reports turns/s and added latency (through − direct) at p50 and p99, for
 * chat completions (X-Session-ID) and for the Responses API (each session a previous_response_id chain).
 *
 * Also the server's CPU per turn, chat and Responses (all its processes, from /proc), the load
 * generator's and the fake upstream's (they share the machine with the server), and SQLite with 2
 * workers (`serve --workers 2`). The load generator and the upstream are lean (bench/_raw-http.ts), so
 * the server gets as much of the machine as it can.
 *
 * `BENCH_QUICK=1` runs fewer turns; `BENCH_PROXY_STORES=sqlite` picks stores (by name prefix);
 * `BENCH_PROXY_RECALL=off` runs the server without recall.
 */
import type { ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { announce, forkWorkers, startChild, treeCpuMicros } from "./_child.js";
import { formatMicros, percentile, printTable, QUICK } from "./_harness.js";
import { RawConnection, startLeanUpstream } from "./_raw-http.js";
import { dropRedisPrefix, type Paired, pairedLine, pairedRedis, redisStore, redisUrl } from "./_proxy-redis.js";

const ROLE = process.env.BENCH_PROXY_ROLE;
const CONCURRENCY = [1, 100];
const TURNS: Record<number, number> = QUICK ? { 1: 300, 100: 2000 } : { 1: 2000, 100: 10000 };
const WARMUP_TURNS = QUICK ? 200 : 1000;
/**
 * Turns of each API at 100 sessions before any row is measured: the server's JIT compiler is
 * still busy through the first few thousand turns at that concurrency (measured: the first 2,000 cost
 * about twice the CPU per turn of the later ones, and on a slower 2-vCPU VM the CPU per turn settles
 * only after ~8,000 turns), which a long-running server pays once.
 * `BENCH_PROXY_WARM=<turns>` sets it; `BENCH_PROXY_WARM=0` skips it (the bench as it was before
 * 2026-11-23; 2,000 quick / 5,000 full until the fifth session's end).
 */
const WARM_100_TURNS = process.env.BENCH_PROXY_WARM === undefined ? 8000 : Number(process.env.BENCH_PROXY_WARM);

/**
 * `BENCH_PROXY_LEAN=0`: the fake upstream of the tests (`node:http`) instead of the lean one; the load
 * generator is the lean client either way.
 */
const LEAN_UPSTREAM = process.env.BENCH_PROXY_LEAN !== "0";

/** `BENCH_PROXY_RECALL=off`: the server without recall (`--no-recall`), to see what recall costs a turn. */
const RECALL_OFF = process.env.BENCH_PROXY_RECALL === "off";

/** Child role: the fake upstream (requests are not kept, so memory stays flat). */
async function runUpstream(): Promise<void> {
  if (LEAN_UPSTREAM) {
    process.stdout.write(`READY ${(await startLeanUpstream()).url}\n`);
    return;
  }
  const { startFakeUpstream } = await import("../test/_fake-upstream.js");
  const fake = await startFakeUpstream();
  setInterval(() => fake.requests.splice(0), 500).unref();
  process.stdout.write(`READY ${fake.url}\n`);
}

/**
 * Child role: threadkeep, as `threadkeep serve` would run it; with `BENCH_WORKERS` above 1, as
 * `serve --workers N` does (node:cluster, SQLite with its lease in the file).
 */
async function runServer(): Promise<void> {
  const workers = Number(process.env.BENCH_WORKERS ?? 1);
  if (forkWorkers(workers)) return;
  const { createServer } = await import("../src/server/index.js");
  const store = process.env.BENCH_STORE as string;
  const server = await createServer({
    memory: {
      store: workers > 1 && store.startsWith("sqlite:") ? `${store}?lease=shared` : await redisStore(store),
      // Recall (on by default: one search of the session per turn) off, as `--no-recall` does.
      ...(RECALL_OFF ? { recall: { enabled: false } } : {}),
    },
    upstream: process.env.BENCH_UPSTREAM as string,
    port: 0,
    // 100 sessions of one user are a flood by the default limits; bench/fair-share.ts measures those.
    fairShare: false,
  });
  await server.memory.store();
  announce(await server.listen());
  process.once("SIGTERM", () => server.close().then(() => process.exit(0)));
}

/** Starts this script in a role and waits for the URL it prints. */
const startRole = (role: string, env: Record<string, string> = {}) =>
  startChild(fileURLToPath(import.meta.url), role, env);

interface Run {
  turnsPerSecond: number;
  p50: number;
  p99: number;
}

/**
 * `sessions` sessions, each on its own keep-alive connection sending its turns one after another,
 * `total` turns in all, through the lean client of bench/_raw-http.ts; chat completions (with an
 * `X-Session-ID` when `withSession`) or Responses (each session a previous_response_id chain).
 */
async function drive(
  base: string,
  sessions: number,
  total: number,
  withSession: boolean,
  api: "chat" | "responses" = "chat",
): Promise<Run> {
  const url = new URL(base);
  const path = `${url.pathname.replace(/\/?(v1)?\/?$/, "")}/v1/${api === "chat" ? "chat/completions" : "responses"}`;
  const connections = await Promise.all(Array.from({ length: sessions }, () => RawConnection.open(url)));
  const samples: number[] = [];
  const perSession = Math.ceil(total / sessions);
  const start = performance.now();
  await Promise.all(
    connections.map(async (connection) => {
      const headers = withSession && api === "chat" ? `X-Session-ID: ${randomUUID()}\r\n` : "";
      let previous = "";
      for (let i = 0; i < perSession; i++) {
        const body =
          api === "chat"
            ? `{"model":"fake","messages":[{"role":"user","content":"Turn ${i}: what did I say before?"}]}`
            : `{"model":"fake","input":"Turn ${i}: what did I say before?"${previous ? `,"previous_response_id":"${previous}"` : ""}}`;
        const sent = performance.now();
        const response = await connection.post(path, body, headers, api === "responses");
        samples.push((performance.now() - sent) * 1000);
        if (response.status !== 200) throw new Error(`HTTP ${response.status}: ${response.body?.slice(0, 300)}`);
        if (api === "responses") previous = JSON.parse(response.body!).id;
      }
    }),
  );
  const seconds = (performance.now() - start) / 1000;
  for (const connection of connections) connection.close();
  samples.sort((a, b) => a - b);
  return { turnsPerSecond: samples.length / seconds, p50: percentile(samples, 50), p99: percentile(samples, 99) };
}

/** {@link drive} for the Responses API. */
const driveResponses = (base: string, sessions: number, total: number) =>
  drive(base, sessions, total, true, "responses");

interface Row {
  api: "chat" | "responses";
  store: string;
  sessions: number;
  direct: Run;
  through: Run;
  /** Server CPU per turn through threadkeep (all its processes), in µs. */
  cpuPerTurn?: number;
  /** CPU per turn through threadkeep of the load generator (this process) and of the fake upstream, in µs. */
  benchCpu?: { client: number; upstream: number };
}

/** CPU time so far of the server (all its processes), this process (the load generator) and the fake upstream, in µs. */
function cpuNow(server: number, upstream: number): { server: number; client: number; upstream: number } {
  const own = process.cpuUsage();
  return { server: treeCpuMicros(server), client: own.user + own.system, upstream: treeCpuMicros(upstream) };
}

/** Runs `run` (`turns` turns) and returns its result with the CPU per turn of each process. */
async function measuredCpu<T>(server: number, upstream: number, turns: number, run: () => Promise<T>) {
  const before = cpuNow(server, upstream);
  const value = await run();
  const after = cpuNow(server, upstream);
  return {
    value,
    server: (after.server - before.server) / turns,
    bench: { client: (after.client - before.client) / turns, upstream: (after.upstream - before.upstream) / turns },
  };
}

async function postgresUrl(): Promise<string | null> {
  const { serviceAvailable, TEST_POSTGRES_URL } = await import("../test/_services.js");
  const available = await serviceAvailable("postgres").catch((error: Error) => error.message);
  if (available === true) return TEST_POSTGRES_URL;
  console.log(`postgres: skipped, ${available}`);
  return null;
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "threadkeep-bench-proxy-"));
  const only = process.env.BENCH_PROXY_STORES?.split(",");
  // memory: is the reference: the proxy's own cost, without a store's I/O.
  const stores: [string, string, number, Record<string, string>?][] = [
    ["sqlite", `sqlite:${join(dir, "threadkeep.db")}`, 1],
    ["sqlite ×2 workers", `sqlite:${join(dir, "threadkeep-2.db")}`, 2],
    ["memory", "memory:", 1],
  ];
  if (!only || only.includes("postgres")) {
    const url = await postgresUrl();
    if (url) stores.push(["postgres", url, 1]);
  }
  const redisPrefix = `threadkeep-bench-proxy-${randomUUID().slice(0, 8)}:`;
  const redis = !only || only.some((o) => o.startsWith("redis")) ? await redisUrl() : null;
  if (redis) {
    stores.push(["redis call by call", redis, 1, { BENCH_CALL_BY_CALL: "1", BENCH_REDIS_PREFIX: redisPrefix }]);
    stores.push(["redis", redis, 1, { BENCH_REDIS_PREFIX: redisPrefix }]);
  }
  const upstream = await startRole("upstream");
  const rows: Row[] = [];
  let paired: Paired | undefined;
  try {
    for (const [name, storeUrl, workers, env] of stores.filter(([n]) => !only || only.some((o) => n.startsWith(o)))) {
      let server: { child: ChildProcess; url: string };
      try {
        server = await startRole("server", {
          BENCH_STORE: storeUrl,
          BENCH_UPSTREAM: upstream.url,
          BENCH_WORKERS: String(workers),
          ...env,
        });
      } catch (error) {
        console.log(`${name}: skipped, ${(error as Error).message}`);
        continue;
      }
      try {
        await drive(server.url, 10, WARMUP_TURNS, true);
        await driveResponses(server.url, 10, WARMUP_TURNS);
        await drive(upstream.url, 10, WARMUP_TURNS, false);
        // Each worker compiles its own hot paths and sees 1/N of the turns: warmed N times as long,
        // each worker gets the warm-up a single server gets. Before every row, the 1-session one too,
        // which came after the short warm-up alone: in one process the first 100 turns cost 3.3 ms of
        // CPU each, the later ones 0.8–1.5 ms (the same turn loop, src/ through tsx).
        const warm = WARM_100_TURNS * workers;
        if (warm > 0) {
          const cpuBefore = treeCpuMicros(server.child.pid!);
          await drive(server.url, 100, warm, true);
          await driveResponses(server.url, 100, warm);
          const warmCpu = (treeCpuMicros(server.child.pid!) - cpuBefore) / (2 * warm);
          console.log(`${name} × 100: warm-up, ${warm} turns of each API: server CPU ${Math.round(warmCpu)} µs/turn`);
        }
        for (const sessions of CONCURRENCY) {
          const direct = await drive(upstream.url, sessions, TURNS[sessions], false);
          const pid = server.child.pid!;
          const chat = await measuredCpu(pid, upstream.child.pid!, TURNS[sessions], () =>
            drive(server.url, sessions, TURNS[sessions], true),
          );
          const responses = await measuredCpu(pid, upstream.child.pid!, TURNS[sessions], () =>
            driveResponses(server.url, sessions, TURNS[sessions]),
          );
          rows.push(
            {
              api: "chat",
              store: name,
              sessions,
              direct,
              through: chat.value,
              cpuPerTurn: chat.server,
              benchCpu: chat.bench,
            },
            {
              api: "responses",
              store: name,
              sessions,
              direct,
              through: responses.value,
              cpuPerTurn: responses.server,
              benchCpu: responses.bench,
            },
          );
          console.log(
            `${name} × ${sessions}: ${Math.round(chat.value.turnsPerSecond)} chat turns/s (server CPU ${Math.round(chat.server)} µs/turn, ` +
              `load generator ${Math.round(chat.bench.client)}, upstream ${Math.round(chat.bench.upstream)}), ` +
              `${Math.round(responses.value.turnsPerSecond)} responses turns/s (server CPU ${Math.round(responses.server)} µs/turn), ` +
              `${Math.round(direct.turnsPerSecond)} direct`,
          );
        }
      } finally {
        server.child.kill("SIGTERM");
      }
    }
    if (redis) {
      const p50 = async (base: string, total: number, withSession: boolean) =>
        (await drive(base, 1, total, withSession)).p50;
      paired = await pairedRedis({ startRole, p50, warmupTurns: WARMUP_TURNS }, upstream.url, redis, redisPrefix);
    }
  } finally {
    upstream.child.kill("SIGTERM");
    rmSync(dir, { recursive: true, force: true });
    if (redis)
      await dropRedisPrefix(redis, redisPrefix).catch((error) =>
        console.log(`redis: keys under ${redisPrefix} left: ${error}`),
      );
  }
  report(rows, paired);
}

function report(rows: Row[], paired?: Paired): void {
  console.log(
    `\n## Proxy (${TURNS[1].toLocaleString("en")} turns at 1 session, ${TURNS[100].toLocaleString("en")} at 100; zero-latency upstream)\n`,
  );
  printTable(
    [
      "api",
      "store",
      "sessions",
      "direct turns/s",
      "through turns/s",
      "direct p50",
      "through p50",
      "added p50",
      "added p99",
      "server CPU / turn",
      "client + upstream CPU / turn",
    ],
    rows.map((r) => [
      r.api,
      r.store,
      String(r.sessions),
      Math.round(r.direct.turnsPerSecond).toLocaleString("en"),
      Math.round(r.through.turnsPerSecond).toLocaleString("en"),
      formatMicros(r.direct.p50),
      formatMicros(r.through.p50),
      formatMicros(r.through.p50 - r.direct.p50),
      formatMicros(r.through.p99 - r.direct.p99),
      r.cpuPerTurn === undefined ? "–" : formatMicros(r.cpuPerTurn),
      r.benchCpu === undefined ? "–" : `${formatMicros(r.benchCpu.client)} + ${formatMicros(r.benchCpu.upstream)}`,
    ]),
  );
  const single = rows.find((r) => r.api === "chat" && r.store === "sqlite" && r.sessions === 1);
  const many = rows.find((r) => r.api === "chat" && r.store === "sqlite" && r.sessions === 100);
  if (single && many) {
    const added = (single.through.p50 - single.direct.p50) / 1000;
    const rate = many.through.turnsPerSecond;
    console.log(
      `\nsqlite added latency p50 at 1 session: ${added.toFixed(2)} ms (target < 2 ms: ${added < 2 ? "met" : "MISSED"})`,
    );
    console.log(
      `sqlite throughput at 100 sessions: ${Math.round(rate)} turns/s (target > 2,000: ${rate > 2000 ? "met" : "MISSED"})`,
    );
    const cpu = many.cpuPerTurn ?? Number.NaN;
    console.log(
      `sqlite server CPU per turn at 100 sessions: ${Math.round(cpu)} µs (target ≤ 500 µs: ${cpu <= 500 ? "met" : "MISSED"})`,
    );
    const responses = rows.find((r) => r.api === "responses" && r.store === "sqlite" && r.sessions === 100)?.cpuPerTurn;
    if (responses !== undefined)
      console.log(`sqlite server CPU per Responses turn at 100 sessions: ${Math.round(responses)} µs`);
  }
  const two = rows.find((r) => r.api === "chat" && r.store === "sqlite ×2 workers" && r.sessions === 100);
  if (many && two) {
    const ratio = two.through.turnsPerSecond / many.through.turnsPerSecond;
    console.log(
      `sqlite 2 workers / 1 worker at 100 sessions: ${ratio.toFixed(2)}× turns/s (target ≥ 1.5×: ${ratio >= 1.5 ? "met" : "MISSED"})`,
    );
  }
  if (paired) console.log(pairedLine(paired));
  const pg = rows.find((r) => r.api === "chat" && r.store === "postgres" && r.sessions === 1);
  if (pg) {
    const added = (pg.through.p50 - pg.direct.p50) / 1000;
    console.log(
      `postgres added latency p50 at 1 session: ${added.toFixed(2)} ms (target ≤ 2 ms: ${added <= 2 ? "met" : "MISSED"})`,
    );
  }
}

if (ROLE === "upstream") await runUpstream();
else if (ROLE === "server") await runServer();
else await main();
