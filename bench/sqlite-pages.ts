/**
 * How many pages a SQLite append writes to the write-ahead log: `memory.addMessages` of one message
 * (the default cap of 200) against the raw baseline's plain INSERT, on 1,000 sessions × 100 messages
 * (`BENCH_QUICK=1`: 250 × 20). A commit costs about 3.5 µs per page, so the page count is most of what
 * an append costs over the raw one (docs/BENCHMARKS.md, "SQLite: where the append's time and its p99 go").
 *
 * Counted from the log itself: a second connection truncates the log, the subject appends `BATCH`
 * messages (one transaction each), and the log's size over (page size + 24) is the frames written.
 * Two passes over random sessions: "first" touches sessions not written in this run (as a session's
 * first message of the hour does), "steady" the same sessions again.
 */
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { createMemory } from "../src/create-memory.js";
import { createSqliteStore } from "../src/stores/sqlite/index.js";
import { QUICK, seededRandom } from "./_harness.js";
import { openSqliteRaw } from "./_raw-baselines.js";
import { loadStore, MAX_MESSAGES, type Scale } from "./_store-bench.js";
import { messageOf, sessionIdOf } from "./_store-data.js";

const scale: Scale = QUICK
  ? { label: "5K", sessions: 250, messagesPerSession: 20 }
  : { label: "100K", sessions: 1_000, messagesPerSession: 100 };
/** Appends per counted batch: few enough that the log never reaches a checkpoint within one. */
const BATCH = 50;
const BATCHES = 6;

/** Frames in the log at `path`-wal, from its size. */
function frames(path: string, pageSize: number): number {
  const size = statSync(`${path}-wal`, { throwIfNoEntry: false })?.size ?? 0;
  return size <= 32 ? 0 : (size - 32) / (pageSize + 24);
}

/** Pages per append of `append`, over `BATCHES` batches of `BATCH` appends to `ids`, each batch from an empty log. */
async function pagesPerAppend(path: string, ids: string[], append: (id: string, m: number) => unknown): Promise<number> {
  const probe = new Database(path);
  const pageSize = probe.pragma("page_size", { simple: true }) as number;
  let total = 0;
  let m = 0;
  for (let b = 0; b < BATCHES; b++) {
    probe.pragma("wal_checkpoint(TRUNCATE)");
    for (let i = 0; i < BATCH; i++) await append(ids[b * BATCH + i], m++);
    total += frames(path, pageSize);
  }
  probe.close();
  return total / (BATCHES * BATCH);
}

const dir = mkdtempSync(join(tmpdir(), "threadkeep-bench-pages-"));
try {
  const path = join(dir, "threadkeep.db");
  // No checkpoint worker: it would empty the log between the counts.
  const store = createSqliteStore({ path, backgroundCheckpoints: false });
  const memory = createMemory({ store, ttlMs: 0, maxMessages: MAX_MESSAGES });
  await loadStore(store, scale, "sqlite", 1);
  const raw = openSqliteRaw(scale, join(dir, "raw"));
  raw.load(scale);

  const random = seededRandom(15);
  const picks = Array.from({ length: BATCHES * BATCH }, () => sessionIdOf(Math.floor(random() * scale.sessions)));
  const owner = (id: string) => `user-${Number.parseInt(id.slice(-12), 16) % 500}`;
  const viaMemory = (id: string, m: number) => memory.addMessages(id, [messageOf(7, m)], { userId: owner(id) });
  const first = await pagesPerAppend(path, picks, viaMemory);
  const steady = await pagesPerAppend(path, picks, viaMemory);
  const rawPages = await pagesPerAppend(join(dir, "raw", "raw.db"), picks, (id, m) => raw.subject.append1(id, messageOf(7, m)));
  console.log(`scale ${scale.label}, ${BATCHES} × ${BATCH} appends of one message to random sessions`);
  console.log(`  Memory append, first write to the session in this run: ${first.toFixed(2)} log pages per append`);
  console.log(`  Memory append, the same sessions again:                ${steady.toFixed(2)} log pages per append`);
  console.log(`  raw INSERT:                                            ${rawPages.toFixed(2)} log pages per append`);
  await raw.close();
  await store.close();
} finally {
  rmSync(dir, { recursive: true, force: true });
}
