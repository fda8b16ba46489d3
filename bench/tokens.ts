/**
 * Huge-input benchmark (issue 9): the cost of one turn's context when a message is 100 KB, 1 MB or
 * 10 MB of the worst shapes for a tokenizer, through `Memory.buildContext` on the in-memory store
 * (what the server runs per turn): wall time, CPU time, and the longest event-loop stall measured
 * with `perf_hooks.monitorEventLoopDelay` while it ran. On a shared machine that wall-clock stall also
 * counts time the OS ran other processes, so the longest stretch of this process's CPU time between
 * two ticks of a 1 ms timer ("CPU stall") is shown too: what the stall would be on an idle machine. Every run gets a fresh random text (so no
 * cache of threadkeep or gpt-tokenizer has seen it) and an emptied token cache.
 *
 * `BENCH_QUICK=1` runs one round instead of three. The median of the rounds is printed.
 */
import { monitorEventLoopDelay } from "node:perf_hooks";
import { clearTokenCache, countContextTokens } from "../src/core/context/tokens.js";
import { createMemory } from "../src/create-memory.js";
import { createMemoryStore } from "../src/stores/in-process/index.js";
import { printTable, QUICK, seededRandom } from "./_harness.js";

const SIZES = [100 * 1024, 1024 * 1024, 10 * 1024 * 1024];
const ROUNDS = QUICK ? 1 : 3;
const BASE64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/** A text of `size` UTF-16 units from `pick`, built in slices (one string join). */
function build(size: number, pick: () => string): string {
  const parts: string[] = [];
  let length = 0;
  while (length < size) {
    const piece = pick();
    parts.push(piece);
    length += piece.length;
  }
  // A parse round trip gives a flat string, as a request body delivers it.
  return JSON.parse(JSON.stringify(parts.join("").slice(0, size))) as string;
}

/** The shapes: one run without whitespace, and random text the tokenizer has no long tokens for. */
function shapes(rand: () => number): Record<string, (size: number) => string> {
  const int = (n: number) => Math.floor(rand() * n);
  return {
    "no spaces (x…x)": (size) => "x".repeat(size),
    "base64 (random)": (size) => build(size, () => BASE64[int(64)]),
    "emoji (random)": (size) => build(size, () => String.fromCodePoint(0x1f300 + int(0x2ff))),
    "CJK (random)": (size) => build(size, () => String.fromCharCode(0x4e00 + int(20_000))),
    "code (minified)": (size) =>
      build(size, () => `${["var", "let", "fn", "if(", "){", "=>", ";", "[", "]"][int(9)]}${int(1e6).toString(36)}`),
  };
}

interface Row {
  wallMs: number;
  cpuMs: number;
  stallMs: number;
  cpuStallMs: number;
  tokens: number;
}

/** Tracks the most CPU time this process spent between two ticks of a 1 ms timer. */
function cpuStallMeter(): { stop(): number } {
  let last = process.cpuUsage();
  let worst = 0;
  const timer = setInterval(() => {
    const now = process.cpuUsage();
    worst = Math.max(worst, (now.user - last.user + now.system - last.system) / 1000);
    last = now;
  }, 1);
  return {
    stop() {
      clearInterval(timer);
      const now = process.cpuUsage();
      return Math.max(worst, (now.user - last.user + now.system - last.system) / 1000);
    },
  };
}

async function once(text: string, stored: boolean): Promise<Row> {
  clearTokenCache();
  const memory = createMemory({ store: createMemoryStore() });
  const id = crypto.randomUUID();
  if (stored) await memory.addMessages(id, [{ role: "user", content: text }]);
  const input = stored ? [{ role: "user" as const, content: "and now?" }] : [{ role: "user" as const, content: text }];
  const delay = monitorEventLoopDelay({ resolution: 1 });
  delay.enable();
  const meter = cpuStallMeter();
  const cpu = process.cpuUsage();
  const start = performance.now();
  const context = await memory.buildContext(id, { input, model: "gpt-4o-mini" });
  const wallMs = performance.now() - start;
  const used = process.cpuUsage(cpu);
  // Let the histogram take its last sample after the work ended.
  await new Promise((resolve) => setTimeout(resolve, 5));
  delay.disable();
  const cpuStallMs = meter.stop();
  await memory.close();
  return {
    wallMs,
    cpuMs: (used.user + used.system) / 1000,
    stallMs: delay.max / 1e6,
    cpuStallMs,
    tokens: context.tokens,
  };
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const ms = (value: number) => `${value.toFixed(1)} ms`;
const size = (bytes: number) => (bytes >= 1024 * 1024 ? `${bytes / (1024 * 1024)} MB` : `${bytes / 1024} KB`);

async function main(): Promise<void> {
  countContextTokens([{ role: "user", content: "load the encoding first" }]);
  const rand = seededRandom(9);
  const rows: string[][] = [];
  let worstStall = 0;
  let worstCpuStall = 0;
  for (const [shape, make] of Object.entries(shapes(rand))) {
    let first = 0;
    for (const bytes of SIZES) {
      for (const stored of bytes === SIZES[SIZES.length - 1] ? [false, true] : [false]) {
        const runs: Row[] = [];
        for (let round = 0; round < ROUNDS; round++) runs.push(await once(make(bytes), stored));
        const cpu = median(runs.map((r) => r.cpuMs));
        const stall = Math.max(...runs.map((r) => r.stallMs));
        const cpuStall = Math.max(...runs.map((r) => r.cpuStallMs));
        worstStall = Math.max(worstStall, stall);
        worstCpuStall = Math.max(worstCpuStall, cpuStall);
        if (bytes === SIZES[0]) first = cpu;
        rows.push([
          shape,
          `${size(bytes)}${stored ? " stored" : ""}`,
          ms(median(runs.map((r) => r.wallMs))),
          ms(cpu),
          `${(cpu / first).toFixed(2)}×`,
          ms(stall),
          ms(cpuStall),
          String(runs[0].tokens),
        ]);
      }
    }
  }
  printTable(
    ["shape", "message", "wall p50", "CPU p50", "CPU vs 100 KB", "max stall", "CPU stall", "tokens sent"],
    rows,
  );
  console.log(
    `\nlongest event-loop stall: ${ms(worstStall)} wall, ${ms(worstCpuStall)} CPU (target ≤ 50 ms); ${ROUNDS} round(s) per row`,
  );
}

await main();
