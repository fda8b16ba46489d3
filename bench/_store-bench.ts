/**
 * What every store benchmark shares: the scales, loading a store with the benchmark data, the two
 * measured operations on the same random access sequence, and the results table. A backend's script
 * (bench/store.ts, bench/store-redis.ts, …) adds its stores and its raw-client baseline.
 */
import type { MessageInput, SessionStore } from "../src/core/types.js";
import {
  elapsedMs,
  formatMicros,
  formatRatio,
  type Measurement,
  measure,
  printTable,
  QUICK,
  seededRandom,
} from "./_harness.js";
import { messageOf, sessionIdOf } from "./_store-data.js";

/** A data size to measure at. */
export interface Scale {
  label: string;
  sessions: number;
  messagesPerSession: number;
}

/** What one subject (a store, or a raw baseline) measured at one scale. */
export interface StoreResult {
  subject: string;
  scale: Scale;
  last20?: Measurement;
  append1?: Measurement;
  /** Why nothing was measured. */
  skipped?: string;
}

/** 40K and 1M messages (`BENCH_QUICK=1`: 5K and 100K). */
export const SCALES: Scale[] = QUICK
  ? [
      { label: "5K", sessions: 250, messagesPerSession: 20 },
      { label: "100K", sessions: 1_000, messagesPerSession: 100 },
    ]
  : [
      { label: "40K", sessions: 2_000, messagesPerSession: 20 },
      { label: "1M", sessions: 10_000, messagesPerSession: 100 },
    ];

/** Timed reads and appends per subject and scale. */
export const READS = QUICK ? 2_000 : 10_000;
export const APPENDS = QUICK ? 500 : 2_000;
/** What `Memory` passes on every commit by default. */
export const MAX_MESSAGES = 200;

/** Messages in a scale. */
export const totalMessages = (scale: Scale) => scale.sessions * scale.messagesPerSession;

/** Creates the scale's sessions and appends their messages in batches of 100 (not timed). */
export async function loadStore(store: SessionStore, scale: Scale, concurrency = 1): Promise<void> {
  const started = performance.now();
  let next = 0;
  const worker = async () => {
    for (let s = next++; s < scale.sessions; s = next++) {
      const id = sessionIdOf(s);
      await store.createSession({ id, userId: `user-${s % 500}` });
      for (let from = 0; from < scale.messagesPerSession; from += 100) {
        const count = Math.min(100, scale.messagesPerSession - from);
        await store.appendMessages(
          id,
          Array.from({ length: count }, (_, i) => messageOf(s, from + i)),
        );
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  console.log(
    `  ${store.name}: loaded ${totalMessages(scale).toLocaleString("en")} messages in ${elapsedMs(started)}`,
  );
}

/** Reads the last 20 and appends 1 at random sessions, in the same order for every subject. */
export async function measureOps(
  scale: Scale,
  last20: (id: string) => unknown,
  append1: (id: string, message: MessageInput) => unknown,
): Promise<Pick<StoreResult, "last20" | "append1">> {
  const ids = Array.from({ length: scale.sessions }, (_, s) => sessionIdOf(s));
  const readRandom = seededRandom(1);
  const read = await measure("load last 20", () => last20(ids[Math.floor(readRandom() * ids.length)]), READS);
  const appendRandom = seededRandom(2);
  const append = await measure(
    "append 1",
    (i) => append1(ids[Math.floor(appendRandom() * ids.length)], messageOf(i, 1_000_000 + i)),
    APPENDS,
  );
  return { last20: read, append1: append };
}

/** Measures a loaded store through the contract, as `Memory` uses it on every turn. */
export function measureStore(
  store: SessionStore,
  scale: Scale,
): Promise<Pick<StoreResult, "last20" | "append1">> {
  return measureOps(
    scale,
    (id) => store.getMessages(id, { last: 20 }),
    (id, message) => store.appendMessages(id, [message], { maxMessages: MAX_MESSAGES }),
  );
}

/** Prints the results as one table, each row's "last 20" p50 also as a ratio to `baseline` at its scale. */
export function printStoreResults(results: StoreResult[], baseline: string): void {
  const base = (scale: Scale) =>
    results.find((r) => r.subject === baseline && r.scale === scale)?.last20?.p50 ?? Number.NaN;
  printTable(
    ["store", "messages", "last 20 p50", "last 20 p99", "append 1 p50", "append 1 p99", "last 20 p50 / raw"],
    results.map((r) =>
      r.skipped || !r.last20 || !r.append1
        ? [r.subject, r.scale.label, `skipped: ${r.skipped ?? "not measured"}`, "", "", "", ""]
        : [
            r.subject,
            r.scale.label,
            formatMicros(r.last20.p50),
            formatMicros(r.last20.p99),
            formatMicros(r.append1.p50),
            formatMicros(r.append1.p99),
            formatRatio(r.last20.p50 / base(r.scale)),
          ],
    ),
  );
}

/** Prints whether `subject` met the targets: "load last 20" within 2× of `baseline`, and no slower at the big scale. */
export function printTargets(results: StoreResult[], subject: string, baseline: string): void {
  const find = (name: string, scale: Scale) =>
    results.find((r) => r.subject === name && r.scale === scale)?.last20;
  const [small, big] = SCALES;
  for (const scale of SCALES) {
    const own = find(subject, scale);
    const raw = find(baseline, scale);
    if (!own || !raw) continue;
    const ratio = own.p50 / raw.p50;
    console.log(
      `${subject} "load last 20" at ${scale.label}: ${formatRatio(ratio)} raw (target ≤ 2×: ${ratio <= 2 ? "met" : "MISSED"})`,
    );
  }
  const before = find(subject, small);
  const after = find(subject, big);
  if (before && after) {
    const growth = after.p50 / before.p50;
    const met = growth <= 1.1 ? "met" : "MISSED";
    console.log(
      `${subject} "load last 20" p50 at ${big.label} vs ${small.label}: ${formatRatio(growth)} (target: no slower, 10% noise allowed: ${met})`,
    );
  }
}
