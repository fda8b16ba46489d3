/**
 * Small timing harness shared by the bench scripts: measure an operation many times, summarise it
 * as percentiles, and print aligned tables. Times are in microseconds.
 */

/** True when `BENCH_QUICK=1`: scripts shrink their data so a run takes seconds, not minutes. */
export const QUICK = process.env.BENCH_QUICK === "1";

/** The summary of one measured operation. */
export interface Measurement {
  name: string;
  iterations: number;
  /** Microseconds. */
  p50: number;
  /** Microseconds. */
  p99: number;
  /** Microseconds. */
  mean: number;
  /**
   * The process's CPU time (user + system, `process.cpuUsage`) per call over the timed calls, in µs:
   * the JavaScript and driver work the call costs this process, whatever the server or the machine's
   * other load add to its wall time. Absent for summaries of samples gathered elsewhere.
   */
  cpu?: number;
  /** With `MeasureOptions.settle`: the process's CPU µs per call spent while settling, after the timed calls. */
  deferredCpu?: number;
}

/** Options of {@link measure}. */
export interface MeasureOptions {
  /** Untimed calls first, so JIT compilation and cold caches do not count. @default 10% of iterations, at least 20 */
  warmup?: number;
  /** Every timed sample (µs) is also appended here, so several calls' samples can be summarised together. */
  samples?: number[];
  /**
   * Collect garbage after the warm-up, before the timed calls (with `--expose-gc`), so the collections
   * of garbage an earlier measurement left do not land in this one's CPU time.
   */
  collectFirst?: boolean;
  /**
   * Awaited after the timed calls and inside the CPU-time window, not the wall-time samples: waits
   * for the work the calls deferred (a store's background indexing, a checkpoint worker), so that
   * work is billed to these calls and not to whatever is measured when it runs.
   */
  settle?: () => Promise<void>;
}

/** The `p`-th percentile (0..100) of ascending `sorted` samples, nearest-rank. */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1];
}

/**
 * Calls `fn(i)` `iterations` times one after another (awaiting each), timing every call.
 * `fn` may be synchronous; a synchronous call is timed without a promise around it.
 */
export async function measure(
  name: string,
  fn: (i: number) => unknown,
  iterations: number,
  options: MeasureOptions = {},
): Promise<Measurement> {
  const warmup = options.warmup ?? Math.max(20, Math.floor(iterations / 10));
  for (let i = 0; i < warmup; i++) await fn(iterations + i);
  const samples = new Float64Array(iterations);
  if (options.collectFirst) collectGarbage();
  const cpuStart = process.cpuUsage();
  for (let i = 0; i < iterations; i++) {
    const start = performance.now();
    const result = fn(i);
    if (result instanceof Promise) await result;
    samples[i] = (performance.now() - start) * 1000;
  }
  const cpuUsed = process.cpuUsage(cpuStart);
  const cpu = (cpuUsed.user + cpuUsed.system) / iterations;
  options.samples?.push(...samples);
  if (!options.settle) return { ...summarize(name, samples), cpu };
  const settleStart = process.cpuUsage();
  await options.settle();
  const settled = process.cpuUsage(settleStart);
  return { ...summarize(name, samples), cpu, deferredCpu: (settled.user + settled.system) / iterations };
}

/** The percentiles and mean of samples in µs. */
export function summarize(name: string, samples: ArrayLike<number>): Measurement {
  const sorted = Array.from(samples).sort((a, b) => a - b);
  const mean = sorted.reduce((sum, x) => sum + x, 0) / sorted.length;
  return { name, iterations: sorted.length, p50: percentile(sorted, 50), p99: percentile(sorted, 99), mean };
}

/** The median of `xs` (upper median for an even count); NaN when empty. */
export function median(xs: readonly number[]): number {
  if (xs.length === 0) return Number.NaN;
  return [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
}

/** Microseconds for a table cell: `12.3 µs`, `1.25 ms`. */
export function formatMicros(us: number): string {
  if (!Number.isFinite(us)) return "–";
  return us >= 1000 ? `${(us / 1000).toFixed(2)} ms` : `${us.toFixed(1)} µs`;
}

/** A ratio for a table cell: `1.42×`. */
export function formatRatio(ratio: number): string {
  return Number.isFinite(ratio) ? `${ratio.toFixed(2)}×` : "–";
}

/** Prints a GitHub-flavoured Markdown table, padded so it also reads well in a terminal. */
export function printTable(headers: string[], rows: string[][]): void {
  const widths = headers.map((h, c) => Math.max(h.length, ...rows.map((r) => (r[c] ?? "").length)));
  const line = (cells: string[]) => `| ${cells.map((cell, c) => (cell ?? "").padEnd(widths[c])).join(" | ")} |`;
  console.log(line(headers));
  console.log(`| ${widths.map((w) => "-".repeat(w)).join(" | ")} |`);
  for (const row of rows) console.log(line(row));
}

/** Seeded pseudo-random numbers (mulberry32), so every store is measured on the same access sequence. */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Runs the collector if the process was started with `--expose-gc` (bench/run.ts does so). */
export function collectGarbage(): void {
  (globalThis as { gc?: () => void }).gc?.();
}

/** Milliseconds since `start` (a `performance.now()` value), for progress lines. */
export function elapsedMs(start: number): string {
  return `${Math.round(performance.now() - start).toLocaleString("en")} ms`;
}
