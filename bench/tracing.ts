/**
 * Tracing benchmark: what OpenTelemetry traces cost a chat turn. One process runs threadkeep (SQLite
 * in memory), a zero-latency upstream and an OTLP/HTTP sink that drops what it receives, and drives
 * turns one after another (each session a few turns) over one keep-alive connection, measuring the
 * process's CPU per turn and the turn's latency:
 *
 * - `off` before any tracing was set up (what every server without `OTEL_EXPORTER_OTLP_ENDPOINT` runs);
 * - then, in alternating rounds so the machine's load hits both alike: `on` (every turn sampled and
 *   exported, http/protobuf) and `off (switched)` (the SDK loaded, threadkeep's spans off: the same
 *   code path as `off`, which shows the rounds' noise).
 *
 * `BENCH_QUICK=1` runs fewer turns.
 */
import { createServer as createHttpServer } from "node:http";
import type { AddressInfo } from "node:net";
import { randomUUID } from "node:crypto";
import { createMemory } from "../src/create-memory.js";
import { setTracing } from "../src/core/tracing.js";
import { createServer, startTracing } from "../src/server/index.js";
import { createSqliteStore } from "../src/stores/sqlite/index.js";
import { formatMicros, percentile, printTable, QUICK } from "./_harness.js";
import { RawConnection, startLeanUpstream } from "./_raw-http.js";

const TURNS_PER_ROUND = QUICK ? 300 : 1500;
const ROUNDS = QUICK ? 2 : 4;
const TURNS_PER_SESSION = 5;

const sink = createHttpServer((req, res) => {
  req.resume();
  req.on("end", () => res.writeHead(200, { "content-type": "application/x-protobuf" }).end());
});
await new Promise<void>((resolve) => sink.listen(0, "127.0.0.1", resolve));
const upstream = await startLeanUpstream();
const memory = createMemory({ store: createSqliteStore({ path: ":memory:" }) });
const server = await createServer({ memory, upstream: upstream.url, port: 0, fairShare: false });
const url = new URL(await server.listen());
const connection = await RawConnection.open(url);

interface Round {
  cpuMicros: number;
  latencies: number[];
}

async function round(): Promise<Round> {
  const latencies: number[] = [];
  let session = "";
  const cpu = process.cpuUsage();
  for (let i = 0; i < TURNS_PER_ROUND; i++) {
    if (i % TURNS_PER_SESSION === 0) session = randomUUID();
    const body = JSON.stringify({ model: "fake-model", messages: [{ role: "user", content: `question ${i}` }] });
    const start = performance.now();
    const response = await connection.post("/v1/chat/completions", body, `X-Session-ID: ${session}\r\n`);
    latencies.push((performance.now() - start) * 1000);
    if (response.status !== 200) throw new Error(`turn answered ${response.status}`);
  }
  const used = process.cpuUsage(cpu);
  return { cpuMicros: (used.user + used.system) / TURNS_PER_ROUND, latencies };
}

const results = new Map<string, Round[]>();
const keep = (name: string, r: Round) => results.set(name, [...(results.get(name) ?? []), r]);

await round(); // warm-up: the JIT, the store's statements
for (let i = 0; i < ROUNDS; i++) keep("off", await round());

process.env.OTEL_EXPORTER_OTLP_ENDPOINT = `http://127.0.0.1:${(sink.address() as AddressInfo).port}`;
process.env.OTEL_TRACES_SAMPLER = "always_on";
const stop = await startTracing();
if (!stop) throw new Error("tracing did not start");
await round(); // warm-up of the traced path
for (let i = 0; i < ROUNDS; i++) {
  setTracing(true);
  keep("on", await round());
  setTracing(false);
  keep("off (switched)", await round());
}

const rows = [...results].map(([name, rounds]) => {
  const cpu = rounds.map((r) => r.cpuMicros);
  const latencies = rounds.flatMap((r) => r.latencies).sort((a, b) => a - b);
  const mean = cpu.reduce((s, x) => s + x, 0) / cpu.length;
  return [
    name,
    formatMicros(mean),
    `${formatMicros(Math.min(...cpu))} – ${formatMicros(Math.max(...cpu))}`,
    formatMicros(percentile(latencies, 50)),
    formatMicros(percentile(latencies, 99)),
  ];
});
console.log(
  `${ROUNDS} rounds of ${TURNS_PER_ROUND} turns each (non-streamed chat completions, SQLite in memory, one client)\n`,
);
printTable(["tracing", "CPU per turn (mean of rounds)", "rounds' range", "latency p50", "latency p99"], rows);

connection.close();
await stop();
await server.close();
await memory.close();
upstream.server.close();
sink.close();
