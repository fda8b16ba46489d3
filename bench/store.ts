/**
 * Store benchmark: p50/p99 of "load last 20" (the context-window read of every turn) and "append 1"
 * for the in-process backends at two sizes, next to a raw better-sqlite3 baseline on the same data.
 *
 * Add a backend by adding a {@link StoreEntry} to {@link STORE_ENTRIES} (or, for a server-backed
 * store with its own baseline, a script of its own on bench/_store-bench.ts). `BENCH_QUICK=1`
 * shrinks the data; `BENCH_STORES=sqlite,memory` picks backends.
 */
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { FullStore } from "../src/core/types.js";
import { createMemoryStore } from "../src/stores/in-process/index.js";
import { createSqliteStore } from "../src/stores/sqlite/index.js";
import { collectGarbage } from "./_harness.js";
import { openSqliteRaw } from "./_raw-baselines.js";
import {
  APPENDS,
  type Growth,
  loadStore,
  measureSubjects,
  pairedRatio,
  printStoreResults,
  printTargets,
  READS,
  ROUNDS,
  SCALES,
  type Scale,
  type StoreResult,
  type Subject,
  storeSubject,
  totalMessages,
} from "./_store-bench.js";

/** A backend to measure. */
export interface StoreEntry {
  name: string;
  /** Opens an empty store whose files (if any) go under `dir`; a string is why the backend is skipped. */
  open(dir: string, scale: Scale): Promise<FullStore | string>;
  /** Scales holding more messages than this are skipped with a printed note (loading would take too long). */
  maxMessages?: number;
  /** Also measure both scales side by side for the "no slower at the big scale" target. */
  growthCheck?: boolean;
}

const RAW = "raw better-sqlite3";

/** The backends this script measures. */
export const STORE_ENTRIES: StoreEntry[] = [
  {
    name: "memory",
    open: async (_dir, scale) => createMemoryStore({ ttlMs: 0, sweepIntervalMs: 0, maxSessions: scale.sessions * 2 }),
  },
  {
    name: "file",
    open: async (dir) => {
      try {
        const { createFileStore } = await import("../src/stores/file/index.js");
        return createFileStore({ dir: join(dir, "sessions") });
      } catch (error) {
        return `the file store could not be loaded (${(error as Error).message.split("\n")[0]})`;
      }
    },
  },
  {
    name: "sqlite",
    open: async (dir) => createSqliteStore({ path: join(dir, "threadkeep.db") }),
    growthCheck: true,
  },
  {
    name: "sqlite+mmap",
    open: async (dir) => createSqliteStore({ path: join(dir, "threadkeep.db"), mmapSizeBytes: 2 ** 30 }),
    growthCheck: true,
  },
];

/** A measured subject and how to let go of it. */
interface Opened {
  subject: Subject;
  close(): Promise<void> | void;
}

async function openEntry(entry: StoreEntry, scale: Scale, dir: string): Promise<Opened | string> {
  if (entry.maxMessages !== undefined && totalMessages(scale) > entry.maxMessages) {
    return `capped at ${entry.maxMessages.toLocaleString("en")} messages`;
  }
  mkdirSync(dir, { recursive: true });
  const store = await entry.open(dir, scale);
  if (typeof store === "string") return store;
  try {
    await loadStore(store, scale, entry.name);
  } catch (error) {
    await store.close();
    throw error;
  }
  return { subject: storeSubject(store, entry.name), close: () => store.close() };
}

/** The baseline: one plain table, one prepared statement per operation, no JSON parsing, no store code. */
function openRaw(scale: Scale, dir: string): Opened {
  const raw = openSqliteRaw(scale, dir);
  raw.load(scale);
  return raw as Opened;
}

/**
 * Keeps the raw baseline loaded for the whole scale and measures each store paired with it, in
 * interleaved rounds, one store loaded at a time: a store's heap (the memory store holds 1M
 * messages in JS objects) then weighs on no other store's numbers.
 */
async function runScale(scale: Scale, entries: StoreEntry[], root: string): Promise<StoreResult[]> {
  console.log(
    `# ${scale.label} messages: ${scale.sessions.toLocaleString("en")} sessions × ${scale.messagesPerSession}`,
  );
  const raw = openRaw(scale, join(root, `raw-${scale.label}`));
  const rawRounds: StoreResult[] = [];
  const results: StoreResult[] = [];
  try {
    for (const entry of entries) {
      const opened = await openEntry(entry, scale, join(root, `${entry.name}-${scale.label}`));
      if (typeof opened === "string") {
        console.log(`  ${entry.name}: skipped, ${opened}`);
        results.push({ subject: entry.name, scale, skipped: opened });
        continue;
      }
      try {
        const [base, own] = await measureSubjects(scale, [raw.subject, opened.subject]);
        rawRounds.push(base);
        results.push({ ...own, baselineP50: base.last20?.p50, ratio: pairedRatio(own, base) });
      } finally {
        await opened.close();
        collectGarbage();
      }
    }
    if (rawRounds.length === 0) rawRounds.push(...(await measureSubjects(scale, [raw.subject])));
  } finally {
    await raw.close();
  }
  // The baseline row: its median pairing.
  rawRounds.sort((a, b) => (a.last20?.p50 ?? 0) - (b.last20?.p50 ?? 0));
  return [rawRounds[Math.floor(rawRounds.length / 2)], ...results];
}

/**
 * The "no slower at 1M than at 40K" check: the small and the big scale loaded at once and measured
 * in the same rounds (the scale tables are minutes apart, and a shared machine drifts more than
 * that), for the raw baseline and the named stores.
 */
async function runGrowth(entries: StoreEntry[], root: string): Promise<Growth[]> {
  const [small, big] = SCALES;
  console.log(`# growth: ${small.label} and ${big.label} side by side (${entries.map((e) => e.name).join(", ")})`);
  const opened: Opened[] = [];
  try {
    const subjects: Subject[] = [];
    for (const entry of [undefined, ...entries]) {
      for (const scale of [small, big]) {
        const dir = join(root, `growth-${entry?.name ?? "raw"}-${scale.label}`);
        const one = entry ? await openEntry(entry, scale, dir) : openRaw(scale, dir);
        if (typeof one === "string") throw new Error(`${entry?.name}: ${one}`);
        opened.push(one);
        subjects.push({
          ...one.subject,
          name: `${one.subject.name} ${scale.label}`,
          sessions: scale.sessions,
        });
      }
    }
    const measured = await measureSubjects(big, subjects);
    const names = [RAW, ...entries.map((e) => e.name)];
    return names.map((subject, k) => ({
      subject,
      ratio: pairedRatio(measured[2 * k + 1], measured[2 * k]),
    }));
  } finally {
    for (const o of opened) await o.close();
    collectGarbage();
  }
}

async function main(): Promise<void> {
  const only = process.env.BENCH_STORES?.split(",").map((s) => s.trim());
  const entries = STORE_ENTRIES.filter((e) => !only || only.includes(e.name));
  const root = mkdtempSync(join(tmpdir(), "threadkeep-bench-"));
  const results: StoreResult[] = [];
  const growth: Growth[] = [];
  try {
    for (const scale of SCALES) {
      results.push(...(await runScale(scale, entries, root)));
      rmSync(root, { recursive: true, force: true });
    }
    const checked = entries.filter((e) => e.growthCheck);
    if (checked.length > 0) growth.push(...(await runGrowth(checked, root)));
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
  console.log(
    `\n## Stores (${ROUNDS} rounds of ${READS.toLocaleString("en")} reads and ${APPENDS.toLocaleString("en")} ` +
      "appends at random sessions, interleaved with the raw baseline; median round, median per-round ratio)\n",
  );
  printStoreResults(results, RAW);
  console.log();
  for (const subject of ["sqlite", "sqlite+mmap"]) printTargets(results, subject, RAW, growth);
}

await main();
