/**
 * Store benchmark: p50/p99 of "load last 20" (the context window read of every turn) and "append 1"
 * for each backend at two sizes, next to a raw better-sqlite3 baseline on the same data.
 *
 * Add a backend by adding a {@link StoreEntry} to {@link STORE_ENTRIES}. `BENCH_QUICK=1` shrinks the
 * data; `BENCH_STORES=sqlite,memory` picks backends.
 */
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import type { MessageInput, SessionStore } from "../src/core/types.js";
import { createMemoryStore } from "../src/stores/memory.js";
import { createSqliteStore } from "../src/stores/sqlite.js";
import {
  collectGarbage,
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

/** A backend to measure. */
export interface StoreEntry {
  name: string;
  /** Opens an empty store whose files (if any) go under `dir`; a string is why the backend is skipped. */
  open(dir: string, scale: Scale): Promise<SessionStore | string>;
  /** Scales holding more messages than this are skipped with a printed note (loading would take too long). */
  maxMessages?: number;
}

/** What one subject (a store, or the raw baseline) measured at one scale. */
export interface Result {
  subject: string;
  scale: Scale;
  last20?: Measurement;
  append1?: Measurement;
  /** Why nothing was measured. */
  skipped?: string;
}

export const SCALES: Scale[] = QUICK
  ? [
      { label: "5K", sessions: 250, messagesPerSession: 20 },
      { label: "100K", sessions: 1_000, messagesPerSession: 100 },
    ]
  : [
      { label: "40K", sessions: 2_000, messagesPerSession: 20 },
      { label: "1M", sessions: 10_000, messagesPerSession: 100 },
    ];

const READS = QUICK ? 2_000 : 10_000;
const APPENDS = QUICK ? 500 : 2_000;
const BATCH = 100;
/** What `Memory` passes on every commit by default. */
const MAX_MESSAGES = 200;
const total = (scale: Scale) => scale.sessions * scale.messagesPerSession;

export const STORE_ENTRIES: StoreEntry[] = [
  {
    name: "memory",
    open: async (_dir, scale) =>
      createMemoryStore({ ttlMs: 0, sweepIntervalMs: 0, maxSessions: scale.sessions * 2 }),
  },
  {
    name: "file",
    open: async (dir) => {
      try {
        const { createFileStore } = await import("../src/stores/jsonl.js");
        return createFileStore({ dir: join(dir, "sessions") });
      } catch (error) {
        return `the file store could not be loaded (${(error as Error).message.split("\n")[0]})`;
      }
    },
  },
  {
    name: "sqlite",
    open: async (dir) => createSqliteStore({ path: join(dir, "threadkeep.db") }),
  },
];

async function loadStore(store: SessionStore, scale: Scale): Promise<void> {
  for (let s = 0; s < scale.sessions; s++) {
    const id = sessionIdOf(s);
    await store.createSession({ id, userId: `user-${s % 500}` });
    for (let from = 0; from < scale.messagesPerSession; from += BATCH) {
      const count = Math.min(BATCH, scale.messagesPerSession - from);
      await store.appendMessages(
        id,
        Array.from({ length: count }, (_, i) => messageOf(s, from + i)),
      );
    }
  }
}

/** Reads and appends at random sessions, in the same order for every subject. */
async function measureOps(
  scale: Scale,
  last20: (id: string) => unknown,
  append1: (id: string, message: MessageInput) => unknown,
): Promise<Pick<Result, "last20" | "append1">> {
  const ids = Array.from({ length: scale.sessions }, (_, s) => sessionIdOf(s));
  const readRandom = seededRandom(1);
  const readResult = await measure(
    "load last 20",
    () => last20(ids[Math.floor(readRandom() * ids.length)]),
    READS,
  );
  const appendRandom = seededRandom(2);
  const appendResult = await measure(
    "append 1",
    (i) => append1(ids[Math.floor(appendRandom() * ids.length)], messageOf(i, 1_000_000 + i)),
    APPENDS,
  );
  return { last20: readResult, append1: appendResult };
}

async function runEntry(entry: StoreEntry, scale: Scale, root: string): Promise<Result> {
  if (entry.maxMessages !== undefined && total(scale) > entry.maxMessages) {
    return {
      subject: entry.name,
      scale,
      skipped: `capped at ${entry.maxMessages.toLocaleString("en")} messages`,
    };
  }
  const dir = join(root, `${entry.name}-${scale.label}`);
  mkdirSync(dir, { recursive: true });
  const store = await entry.open(dir, scale);
  if (typeof store === "string") return { subject: entry.name, scale, skipped: store };
  try {
    const started = performance.now();
    await loadStore(store, scale);
    console.log(
      `  ${entry.name}: loaded ${total(scale).toLocaleString("en")} messages in ${elapsedMs(started)}`,
    );
    const ops = await measureOps(
      scale,
      (id) => store.getMessages(id, { last: 20 }),
      (id, message) => store.appendMessages(id, [message], { maxMessages: MAX_MESSAGES }),
    );
    return { subject: entry.name, scale, ...ops };
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
    collectGarbage();
  }
}

/** The baseline: one plain table, one prepared statement per operation, no JSON parsing, no store code. */
async function runRaw(scale: Scale, root: string): Promise<Result> {
  const dir = join(root, `raw-${scale.label}`);
  mkdirSync(dir, { recursive: true });
  const db = new Database(join(dir, "raw.db"));
  // The same connection settings as the SQLite store, so the ratio measures the store's own work.
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = NORMAL");
  db.exec("CREATE TABLE messages (session_id TEXT, seq INTEGER, body TEXT, PRIMARY KEY (session_id, seq))");
  try {
    const insert = db.prepare("INSERT INTO messages (session_id, seq, body) VALUES (?, ?, ?)");
    const started = performance.now();
    const loadSession = db.transaction((s: number) => {
      for (let m = 0; m < scale.messagesPerSession; m++) {
        insert.run(sessionIdOf(s), m + 1, JSON.stringify(messageOf(s, m)));
      }
    });
    for (let s = 0; s < scale.sessions; s++) loadSession(s);
    console.log(`  raw: loaded ${total(scale).toLocaleString("en")} messages in ${elapsedMs(started)}`);
    const last = db.prepare("SELECT seq, body FROM messages WHERE session_id = ? ORDER BY seq DESC LIMIT 20");
    const nextSeq = new Map<string, number>();
    const ops = await measureOps(
      scale,
      (id) => last.all(id),
      (id, message) => {
        const seq = nextSeq.get(id) ?? scale.messagesPerSession + 1;
        nextSeq.set(id, seq + 1);
        insert.run(id, seq, JSON.stringify(message));
      },
    );
    return { subject: "raw better-sqlite3", scale, ...ops };
  } finally {
    db.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

function report(results: Result[]): void {
  const raw = (scale: Scale) => results.find((r) => r.subject === "raw better-sqlite3" && r.scale === scale);
  printTable(
    ["store", "messages", "last 20 p50", "last 20 p99", "append 1 p50", "append 1 p99", "last 20 p50 / raw"],
    results.map((r) => {
      if (r.skipped) return [r.subject, r.scale.label, `skipped: ${r.skipped}`, "", "", "", ""];
      const base = raw(r.scale)?.last20?.p50 ?? Number.NaN;
      return [
        r.subject,
        r.scale.label,
        formatMicros(r.last20!.p50),
        formatMicros(r.last20!.p99),
        formatMicros(r.append1!.p50),
        formatMicros(r.append1!.p99),
        formatRatio(r.last20!.p50 / base),
      ];
    }),
  );
  const sqlite = SCALES.map((scale) => results.find((r) => r.subject === "sqlite" && r.scale === scale));
  const [small, big] = sqlite;
  if (small?.last20 && big?.last20) {
    console.log();
    for (const r of [small, big]) {
      const ratio = r.last20!.p50 / raw(r.scale)!.last20!.p50;
      console.log(
        `sqlite "load last 20" at ${r.scale.label}: ${formatRatio(ratio)} raw (target ≤ 2×: ${ratio <= 2 ? "met" : "MISSED"})`,
      );
    }
    const growth = big.last20.p50 / small.last20.p50;
    console.log(
      `sqlite "load last 20" p50 at ${big.scale.label} vs ${small.scale.label}: ${formatRatio(growth)} ` +
        `(target: no slower, within 10% noise: ${growth <= 1.1 ? "met" : "MISSED"})`,
    );
  }
}

async function main(): Promise<void> {
  const only = process.env.BENCH_STORES?.split(",").map((s) => s.trim());
  const entries = STORE_ENTRIES.filter((e) => !only || only.includes(e.name));
  const root = mkdtempSync(join(tmpdir(), "threadkeep-bench-"));
  const results: Result[] = [];
  try {
    for (const scale of SCALES) {
      console.log(
        `# ${scale.label} messages: ${scale.sessions.toLocaleString("en")} sessions × ${scale.messagesPerSession}`,
      );
      results.push(await runRaw(scale, root));
      for (const entry of entries) {
        const result = await runEntry(entry, scale, root);
        if (result.skipped) console.log(`  ${entry.name}: skipped, ${result.skipped}`);
        results.push(result);
      }
    }
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
  console.log(
    `\n## Stores (${READS.toLocaleString("en")} reads, ${APPENDS.toLocaleString("en")} appends each, random sessions)\n`,
  );
  report(results);
}

await main();
