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
  /** The baseline's "load last 20" p50 measured in the same interleaved rounds, when paired with one. */
  baselineP50?: number;
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
/** Each subject is measured this many times (`BENCH_ROUNDS`); the median round by p50 is kept, which damps a busy machine. */
export const ROUNDS = Number(process.env.BENCH_ROUNDS) || 3;
/** What `Memory` passes on every commit by default. */
export const MAX_MESSAGES = 200;

/** Messages in a scale. */
export const totalMessages = (scale: Scale) => scale.sessions * scale.messagesPerSession;

/** Creates the scale's sessions and appends their messages in batches of 100 (not timed). */
export async function loadStore(
  store: SessionStore,
  scale: Scale,
  name: string = store.name,
  concurrency = 1,
): Promise<void> {
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
    `  ${name}: loaded ${totalMessages(scale).toLocaleString("en")} messages in ${elapsedMs(started)}`,
  );
  if (store.capabilities.fullTextSearch) {
    // A backend may index text after the append returns; a full-text search waits for it, so the
    // timed appends do not pay for the bulk load's indexing.
    const indexing = performance.now();
    await store.search({ userId: "user-0", text: "groceries", mode: "fulltext", limit: 1 });
    console.log(`  ${name}: full-text index ready ${elapsedMs(indexing)} later`);
  }
}

/** Something measured: a store through the contract, or a raw client doing the same two things. */
export interface Subject {
  name: string;
  /** Reads a session's last 20 messages. */
  last20(id: string): unknown;
  /** Appends one message to a session. */
  append1(id: string, message: MessageInput): unknown;
}

/** A loaded store as `Memory` uses it on every turn: read the window, commit with the default cap. */
export function storeSubject(store: SessionStore, name: string = store.name): Subject {
  return {
    name,
    last20: (id) => store.getMessages(id, { last: 20 }),
    append1: (id, message) => store.appendMessages(id, [message], { maxMessages: MAX_MESSAGES }),
  };
}

/** The round whose p50 is the median of the rounds'. */
function medianRound(rounds: Measurement[]): Measurement {
  return [...rounds].sort((a, b) => a.p50 - b.p50)[Math.floor(rounds.length / 2)];
}

/**
 * Measures loaded subjects in interleaved rounds (each round times every subject in turn, on the
 * same random sessions), so a burst of load on a shared machine hits all of them alike; keeps
 * each subject's median round.
 */
export async function measureSubjects(scale: Scale, subjects: Subject[]): Promise<StoreResult[]> {
  const ids = Array.from({ length: scale.sessions }, (_, s) => sessionIdOf(s));
  const reads = subjects.map((): Measurement[] => []);
  const appends = subjects.map((): Measurement[] => []);
  for (let round = 0; round < ROUNDS; round++) {
    for (const [k, subject] of subjects.entries()) {
      const readRandom = seededRandom(1 + round);
      const pick = () => ids[Math.floor(readRandom() * ids.length)];
      reads[k].push(await measure("load last 20", () => subject.last20(pick()), READS));
      const appendRandom = seededRandom(100 + round);
      const offset = 1_000_000 + round * APPENDS;
      appends[k].push(
        await measure(
          "append 1",
          (i) => subject.append1(ids[Math.floor(appendRandom() * ids.length)], messageOf(i, offset + i)),
          APPENDS,
        ),
      );
    }
  }
  return subjects.map((subject, k) => ({
    subject: subject.name,
    scale,
    last20: medianRound(reads[k]),
    append1: medianRound(appends[k]),
  }));
}

/** Prints the results as one table, each row's "last 20" p50 also as a ratio to `baseline` at its scale. */
export function printStoreResults(results: StoreResult[], baseline: string): void {
  const base = (scale: Scale) =>
    results.find((r) => r.subject === baseline && r.scale === scale)?.last20?.p50 ?? Number.NaN;
  printTable(
    [
      "store",
      "messages",
      "last 20 p50",
      "last 20 p99",
      "append 1 p50",
      "append 1 p99",
      "raw p50, same rounds",
      "last 20 p50 / raw",
    ],
    results.map((r) =>
      r.skipped || !r.last20 || !r.append1
        ? [r.subject, r.scale.label, `skipped: ${r.skipped ?? "not measured"}`, "", "", "", "", ""]
        : [
            r.subject,
            r.scale.label,
            formatMicros(r.last20.p50),
            formatMicros(r.last20.p99),
            formatMicros(r.append1.p50),
            formatMicros(r.append1.p99),
            formatMicros(r.baselineP50 ?? base(r.scale)),
            formatRatio(r.last20.p50 / (r.baselineP50 ?? base(r.scale))),
          ],
    ),
  );
}

/**
 * Prints whether `subject` met the targets: "load last 20" within 2× of `baseline` (paired where
 * measured so), and no slower at the big scale than at the small one (the baseline's own growth
 * is printed next to it: what SQLite itself does with a larger file).
 */
export function printTargets(results: StoreResult[], subject: string, baseline: string): void {
  const find = (name: string, scale: Scale) => results.find((r) => r.subject === name && r.scale === scale);
  const [small, big] = SCALES;
  for (const scale of SCALES) {
    const own = find(subject, scale);
    const raw = own?.baselineP50 ?? find(baseline, scale)?.last20?.p50;
    if (!own?.last20 || raw === undefined) continue;
    const ratio = own.last20.p50 / raw;
    const met = ratio <= 2 ? "met" : "MISSED";
    console.log(
      `${subject} "load last 20" at ${scale.label}: ${formatRatio(ratio)} raw (target ≤ 2×: ${met})`,
    );
  }
  const before = find(subject, small)?.last20;
  const after = find(subject, big)?.last20;
  const rawBefore = find(baseline, small)?.last20;
  const rawAfter = find(baseline, big)?.last20;
  if (before && after) {
    const growth = after.p50 / before.p50;
    const rawGrowth = rawBefore && rawAfter ? `; raw: ${formatRatio(rawAfter.p50 / rawBefore.p50)}` : "";
    const met = growth <= 1.1 ? "met" : "MISSED";
    console.log(
      `${subject} "load last 20" p50 at ${big.label} vs ${small.label}: ${formatRatio(growth)}${rawGrowth} ` +
        `(target: no slower, 10% noise allowed: ${met})`,
    );
  }
}
