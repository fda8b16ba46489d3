/**
 * What every store benchmark shares: the scales, loading a store with the benchmark data, the two
 * measured operations on the same random access sequence, and the results table. A backend's script
 * (bench/store.ts, bench/store-redis.ts, …) adds its stores and its raw-client baseline.
 */
import type { MessageInput, FullStore } from "../src/core/types.js";
import {
  elapsedMs,
  formatMicros,
  formatRatio,
  type Measurement,
  measure,
  printTable,
  QUICK,
  seededRandom,
  summarize,
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
  /** Every round's appends summarised together: a p99 of all of them, not of one round's 200 or 500. */
  append1AllRounds?: Measurement;
  /** "load last 20" p50 of each round. */
  last20Rounds?: number[];
  /** The process's CPU µs per "load last 20" in each round (see `Measurement.cpu`). */
  last20CpuRounds?: number[];
  /** The process's CPU µs per "append 1" in each round. */
  append1CpuRounds?: number[];
  /** The process's CPU µs per "append 1" in each round spent on work the appends deferred (`Subject.settle`), 0 without. */
  append1DeferredCpuRounds?: number[];
  /** The baseline's "load last 20" p50 measured in the same interleaved rounds, when paired with one. */
  baselineP50?: number;
  /** "load last 20" p50 over the paired baseline's: the median of the per-round ratios. */
  ratio?: number;
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

/** Timed reads and appends per subject and round. */
export const READS = QUICK ? 1_000 : 3_000;
export const APPENDS = 500;
/**
 * Rounds per subject (`BENCH_ROUNDS`). Short rounds, interleaved across subjects, with medians
 * taken over rounds: on a shared machine the load drifts within seconds.
 */
export const ROUNDS = Number(process.env.BENCH_ROUNDS) || 9;
/** What `Memory` passes on every commit by default. */
export const MAX_MESSAGES = 200;

/** Messages in a scale. */
export const totalMessages = (scale: Scale) => scale.sessions * scale.messagesPerSession;

/** Creates the scale's sessions and appends their messages in batches of 100 (not timed). */
export async function loadStore(
  store: FullStore,
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
  console.log(`  ${name}: loaded ${totalMessages(scale).toLocaleString("en")} messages in ${elapsedMs(started)}`);
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
  /** How many benchmark sessions it holds, when not the measured scale's number. */
  sessions?: number;
  /**
   * Waits for the work its appends left to run later in this process (a store's deferred search
   * indexing, its checkpoint worker), inside the round's CPU-time window (see `MeasureOptions.settle`).
   */
  settle?: () => Promise<void>;
}

/** A loaded store as `Memory` uses it on every turn: read the window, commit with the default cap. */
export function storeSubject(store: FullStore, name: string = store.name, settle?: () => Promise<void>): Subject {
  return {
    name,
    settle,
    last20: (id) => store.getMessages(id, { last: 20 }),
    append1: (id, message) => store.appendMessages(id, [message], { maxMessages: MAX_MESSAGES }),
  };
}

/** The round whose p50 is the median of the rounds'. */
function medianRound(rounds: Measurement[]): Measurement {
  return [...rounds].sort((a, b) => a.p50 - b.p50)[Math.floor(rounds.length / 2)];
}

/** The median of per-round ratios of two subjects' "load last 20" p50 measured in the same rounds. */
export function pairedRatio(over: StoreResult, under: StoreResult): number {
  const a = over.last20Rounds ?? [];
  const b = under.last20Rounds ?? [];
  const ratios = a.map((x, k) => x / b[k]).sort((x, y) => x - y);
  return ratios.length > 0 ? ratios[Math.floor(ratios.length / 2)] : Number.NaN;
}

/**
 * Measures loaded subjects in interleaved rounds (each round times every subject in turn, on the
 * same random sessions), so a burst of load on a shared machine hits all of them alike; keeps
 * each subject's median round.
 */
export async function measureSubjects(scale: Scale, subjects: Subject[]): Promise<StoreResult[]> {
  const idsOf = subjects.map((subject) =>
    Array.from({ length: subject.sessions ?? scale.sessions }, (_, s) => sessionIdOf(s)),
  );
  const reads = subjects.map((): Measurement[] => []);
  const appends = subjects.map((): Measurement[] => []);
  const appendSamples = subjects.map((): number[] => []);
  for (let round = 0; round < ROUNDS; round++) {
    for (const [k, subject] of subjects.entries()) {
      const ids = idsOf[k];
      const readRandom = seededRandom(1 + round);
      const pick = () => ids[Math.floor(readRandom() * ids.length)];
      // Each timed loop starts on a collected heap, so no subject's CPU time holds the collection of
      // garbage another left behind.
      reads[k].push(await measure("load last 20", () => subject.last20(pick()), READS, { collectFirst: true }));
      // Each subject appends to sessions of its own: on a store that two subjects share, the second
      // would otherwise append to the sessions the first just appended to, a pattern of its own (on
      // SQLite at 1M messages, an append next to a row just inserted writes ~3.4 pages of log
      // instead of ~2: docs/decisions/0001-sqlite-schema.md).
      const appendRandom = seededRandom(100 + round + 1_000 * k);
      const offset = 1_000_000 + round * APPENDS;
      appends[k].push(
        await measure(
          "append 1",
          (i) => subject.append1(ids[Math.floor(appendRandom() * ids.length)], messageOf(i, offset + i)),
          APPENDS,
          { samples: appendSamples[k], collectFirst: true, settle: subject.settle },
        ),
      );
    }
  }
  return subjects.map((subject, k) => ({
    subject: subject.name,
    scale,
    last20: medianRound(reads[k]),
    append1: medianRound(appends[k]),
    append1AllRounds: summarize("append 1", appendSamples[k]),
    last20Rounds: reads[k].map((m) => m.p50),
    last20CpuRounds: reads[k].map((m) => m.cpu ?? Number.NaN),
    append1CpuRounds: appends[k].map((m) => m.cpu ?? Number.NaN),
    append1DeferredCpuRounds: appends[k].map((m) => m.deferredCpu ?? 0),
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
            formatRatio(r.ratio ?? r.last20.p50 / base(r.scale)),
          ],
    ),
  );
}

/** "load last 20" p50 at the big scale over the small one, both loaded and measured in the same rounds. */
export interface Growth {
  subject: string;
  ratio: number;
}

/**
 * Prints whether `subject` met the targets: "load last 20" within 2× of `baseline` (paired where
 * measured so), and no slower at the big scale than at the small one (from `growth`, next to the
 * baseline's own growth: what SQLite itself does with a larger file).
 */
export function printTargets(results: StoreResult[], subject: string, baseline: string, growth: Growth[] = []): void {
  const find = (name: string, scale: Scale) => results.find((r) => r.subject === name && r.scale === scale);
  const [small, big] = SCALES;
  for (const scale of SCALES) {
    const own = find(subject, scale);
    const raw = find(baseline, scale)?.last20?.p50;
    if (!own?.last20 || raw === undefined) continue;
    const ratio = own.ratio ?? own.last20.p50 / raw;
    const met = ratio <= 2 ? "met" : "MISSED";
    console.log(`${subject} "load last 20" at ${scale.label}: ${formatRatio(ratio)} raw (target ≤ 2×: ${met})`);
  }
  const own = growth.find((g) => g.subject === subject);
  if (!own) return;
  const raw = growth.find((g) => g.subject === baseline);
  const met = own.ratio <= 1.1 ? "met" : "MISSED";
  console.log(
    `${subject} "load last 20" p50 at ${big.label} over ${small.label}, side by side: ${formatRatio(own.ratio)}` +
      `${raw ? ` (raw: ${formatRatio(raw.ratio)})` : ""} (target: no slower, 10% noise allowed: ${met})`,
  );
}

/**
 * The report of a store behind a network hop (PostgreSQL, Redis): the table, the "within 2× of raw"
 * target, and the "p99 under 2 ms on loopback" target.
 */
export function printNetworkStoreReport(
  title: string,
  results: StoreResult[],
  subject: string,
  baseline: string,
): void {
  console.log(
    `\n## ${title} (${READS.toLocaleString("en")} reads, ${APPENDS.toLocaleString("en")} appends per round, ` +
      `median of ${ROUNDS} interleaved rounds, random sessions)\n`,
  );
  printStoreResults(results, baseline);
  console.log();
  printTargets(results, subject, baseline);
  for (const r of results.filter((x) => x.subject === subject && x.last20)) {
    const p99 = r.last20!.p99;
    console.log(
      `${subject} "load last 20" p99 at ${r.scale.label}: ${formatMicros(p99)} (target < 2 ms: ${p99 < 2000 ? "met" : "MISSED"})`,
    );
  }
}
