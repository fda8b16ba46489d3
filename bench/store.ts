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
import Database from "better-sqlite3";
import type { SessionStore } from "../src/core/types.js";
import { createMemoryStore } from "../src/stores/memory.js";
import { createSqliteStore } from "../src/stores/sqlite.js";
import { collectGarbage, elapsedMs } from "./_harness.js";
import {
  APPENDS,
  loadStore,
  measureOps,
  measureStore,
  printStoreResults,
  printTargets,
  READS,
  SCALES,
  type Scale,
  type StoreResult,
  totalMessages,
} from "./_store-bench.js";
import { messageOf, sessionIdOf } from "./_store-data.js";

/** A backend to measure. */
export interface StoreEntry {
  name: string;
  /** Opens an empty store whose files (if any) go under `dir`; a string is why the backend is skipped. */
  open(dir: string, scale: Scale): Promise<SessionStore | string>;
  /** Scales holding more messages than this are skipped with a printed note (loading would take too long). */
  maxMessages?: number;
}

const RAW = "raw better-sqlite3";

/** The backends this script measures. */
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
  {
    name: "sqlite+mmap",
    open: async (dir) => createSqliteStore({ path: join(dir, "threadkeep.db"), mmapSizeBytes: 2 ** 30 }),
  },
];

async function runEntry(entry: StoreEntry, scale: Scale, root: string): Promise<StoreResult> {
  if (entry.maxMessages !== undefined && totalMessages(scale) > entry.maxMessages) {
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
    await loadStore(store, scale);
    return { subject: entry.name, scale, ...(await measureStore(store, scale)) };
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
    collectGarbage();
  }
}

/** The baseline: one plain table, one prepared statement per operation, no JSON parsing, no store code. */
async function runRaw(scale: Scale, root: string): Promise<StoreResult> {
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
    console.log(
      `  raw: loaded ${totalMessages(scale).toLocaleString("en")} messages in ${elapsedMs(started)}`,
    );
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
    return { subject: RAW, scale, ...ops };
  } finally {
    db.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  const only = process.env.BENCH_STORES?.split(",").map((s) => s.trim());
  const entries = STORE_ENTRIES.filter((e) => !only || only.includes(e.name));
  const root = mkdtempSync(join(tmpdir(), "threadkeep-bench-"));
  const results: StoreResult[] = [];
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
  printStoreResults(results, RAW);
  console.log();
  for (const subject of ["sqlite", "sqlite+mmap"]) printTargets(results, subject, RAW);
}

await main();
