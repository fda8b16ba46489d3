/**
 * Fair share: while one user floods the server (64 turns at once, each connection sending its next
 * turn as soon as the last one is answered or refused, Retry-After ignored), how fast are another
 * user's turns, beside the same user's turns on an idle server? Measured with the limits off, with
 * the defaults (16 in flight and 600 a minute per user), and with the concurrency limit alone, in one
 * run. The fake upstream answers every request after a fixed delay (a fast model), the server runs
 * `serve`'s defaults on SQLite, and the flood runs in a process of its own, so the probe's timings
 * are not delayed by the flood's client.
 *
 * `BENCH_QUICK=1` measures for less time; `BENCH_FAIR_SHARE_SECONDS=<s>` sets each phase's length;
 * `BENCH_FAIR_SHARE_DELAY_MS=<ms>` the upstream's delay (20); `BENCH_FAIR_SHARE_STORE=memory` the in-memory
 * store instead of SQLite.
 */
import type { ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { announce, startChild } from "./_child.js";
import { formatMicros, percentile, printTable, QUICK } from "./_harness.js";
import { RawConnection, startLeanUpstream } from "./_raw-http.js";

const ROLE = process.env.BENCH_PROXY_ROLE;
const SECONDS = Number(process.env.BENCH_FAIR_SHARE_SECONDS ?? (QUICK ? 3 : 10));
const DELAY_MS = Number(process.env.BENCH_FAIR_SHARE_DELAY_MS ?? 20);
const FLOOD = 64;
const MEMORY_STORE = process.env.BENCH_FAIR_SHARE_STORE === "memory";
/** The flood's child: wait out each 429's Retry-After (else send the next request at once). */
const POLITE = process.env.BENCH_FLOOD_POLITE === "1";
const KEYS = { "k-flood": "flood", "k-probe": "probe" };

/** The server's limits in one phase: `false` for none, `{}` for the defaults. */
type Limits = false | { userConcurrency?: number; userRate?: null };

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const turnBody = (n: number) =>
  JSON.stringify({ model: "fake", messages: [{ role: "user", content: `question ${n}` }] });

/** Child role: the fake upstream. */
async function runUpstream(): Promise<void> {
  process.stdout.write(`READY ${(await startLeanUpstream(DELAY_MS)).url}\n`);
}

/** Child role: threadkeep with the phase's limits, two API keys (the flood's user, the probe's). */
async function runServer(): Promise<void> {
  const { createServer } = await import("../src/server/index.js");
  const server = await createServer({
    memory: { store: process.env.BENCH_STORE as string },
    upstream: process.env.BENCH_UPSTREAM as string,
    apiKeys: KEYS,
    fairShare: JSON.parse(process.env.BENCH_LIMITS as string) as Limits,
    port: 0,
  });
  await server.memory.store();
  announce(await server.listen());
  process.once("SIGTERM", () => server.close().then(() => process.exit(0)));
}

/** Child role: the flood, FLOOD connections of one user, each on a session of its own, until SIGTERM; prints its counts. */
async function runFlood(): Promise<void> {
  const url = new URL(process.env.BENCH_URL as string);
  const connections = await Promise.all(Array.from({ length: FLOOD }, () => RawConnection.open(url)));
  const counts: Record<string, number> = {};
  let running = true;
  const loops = connections.map(async (connection) => {
    const headers = `Authorization: Bearer k-flood\r\nX-Session-ID: ${randomUUID()}\r\n`;
    for (let n = 0; running; n++) {
      const { status, body } = await connection.post("/v1/chat/completions", turnBody(n), headers);
      counts[status] = (counts[status] ?? 0) + 1;
      // A polite client (the OpenAI SDKs) waits as told; the message says it as the Retry-After header does.
      if (POLITE && status === 429) await sleep(1000 * Number(/Retry in (\d+) s/.exec(body ?? "")?.[1] ?? 1));
    }
  });
  process.once("SIGTERM", () => {
    running = false;
    // Requests still in flight (or waiting out a Retry-After) are dropped with the process.
    process.stdout.write(`COUNTS ${JSON.stringify(counts)}\n`, () => process.exit(0));
  });
  // A connection the server closed ends its loop; the others go on.
  for (const loop of loops) loop.catch(() => {});
  process.stdout.write("READY flood\n");
}

/** One chat of the probe's user, a turn after another for `seconds`: each turn's latency in µs, and any refusal. */
async function probe(url: URL, seconds: number): Promise<{ micros: number[]; refused: number }> {
  const connection = await RawConnection.open(url);
  const headers = `Authorization: Bearer k-probe\r\nX-Session-ID: ${randomUUID()}\r\n`;
  const micros: number[] = [];
  let refused = 0;
  const until = performance.now() + seconds * 1000;
  for (let n = 0; performance.now() < until; n++) {
    const start = performance.now();
    const { status, body } = await connection.post("/v1/chat/completions", turnBody(n), headers);
    if (status === 429) refused++;
    else if (status !== 200) throw new Error(`probe turn: HTTP ${status}: ${body?.slice(0, 200)}`);
    micros.push((performance.now() - start) * 1000);
  }
  connection.close();
  return { micros: micros.sort((a, b) => a - b), refused };
}

function stop(child: ChildProcess): Promise<string> {
  return new Promise((resolve) => {
    let out = "";
    child.stdout?.on("data", (d) => (out += d));
    child.once("exit", () => resolve(out));
    child.kill("SIGTERM");
  });
}

interface Phase {
  name: string;
  limits: Limits;
  flood: boolean;
  /** The flood waits out Retry-After. */
  polite?: boolean;
}

async function main(): Promise<void> {
  const script = fileURLToPath(import.meta.url);
  const dir = mkdtempSync(join(tmpdir(), "tk-bench-fair-"));
  const upstream = await startChild(script, "upstream");
  const phases: Phase[] = [
    { name: "idle server, limits off", limits: false, flood: false },
    { name: "idle server, default limits", limits: {}, flood: false },
    { name: "flood, limits off", limits: false, flood: true },
    { name: "flood, default limits (16 in flight, 600/min)", limits: {}, flood: true },
    { name: "flood, 16 in flight, no rate limit", limits: { userRate: null }, flood: true },
    { name: "flood waiting out Retry-After, default limits", limits: {}, flood: true, polite: true },
    {
      name: "flood waiting out Retry-After, 16 in flight, no rate limit",
      limits: { userRate: null },
      flood: true,
      polite: true,
    },
  ];
  console.log(
    `fair share: one user floods with ${FLOOD} turns at once while another chats; upstream answers after ${DELAY_MS} ms; ${MEMORY_STORE ? "memory:" : "SQLite"}; ${SECONDS} s a phase; ${cpus().length} cores (${cpus()[0]?.model ?? "?"}), load average ${loadavg()[0].toFixed(1)} at the start\n`,
  );
  const rows: string[][] = [];
  try {
    for (const [i, phase] of phases.entries()) {
      const server = await startChild(script, "server", {
        BENCH_STORE: MEMORY_STORE ? "memory:" : `sqlite:${join(dir, `phase-${i}.db`)}`,
        BENCH_UPSTREAM: upstream.url,
        BENCH_LIMITS: JSON.stringify(phase.limits),
      });
      try {
        const url = new URL(server.url);
        // Warm-up: the server's first turns pay for JIT compilation and the tokenizer.
        await probe(url, 1);
        const flood = phase.flood
          ? await startChild(script, "flood", { BENCH_URL: server.url, BENCH_FLOOD_POLITE: phase.polite ? "1" : "0" })
          : undefined;
        if (flood) await sleep(1000);
        const result = await probe(url, SECONDS);
        const counts = flood ? JSON.parse(/COUNTS (\S+)/.exec(await stop(flood.child))?.[1] ?? "{}") : {};
        const floodSeconds = SECONDS + 1;
        rows.push([
          phase.name,
          String(result.micros.length),
          formatMicros(percentile(result.micros, 50)),
          formatMicros(percentile(result.micros, 90)),
          formatMicros(percentile(result.micros, 99)),
          String(result.refused),
          flood ? String(Math.round((counts["200"] ?? 0) / floodSeconds)) : "–",
          flood ? String(Math.round((counts["429"] ?? 0) / floodSeconds)) : "–",
        ]);
        console.log(`${phase.name}: done`);
      } finally {
        await stop(server.child);
      }
    }
  } finally {
    await stop(upstream.child);
    rmSync(dir, { recursive: true, force: true });
  }
  console.log("");
  printTable(
    [
      "phase",
      "probe turns",
      "probe p50",
      "probe p90",
      "probe p99",
      "probe refused",
      "flood answered/s",
      "flood refused/s",
    ],
    rows,
  );
}

if (ROLE === "upstream") await runUpstream();
else if (ROLE === "server") await runServer();
else if (ROLE === "flood") await runFlood();
else await main();
