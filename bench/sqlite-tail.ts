/**
 * Where the SQLite append's p99 comes from. The api bench's SQLite rounds (1,000 reads then 200
 * appends through `Memory`, next to the raw baseline's, interleaved), with every append over 1 ms
 * put in one class:
 *   - checkpoint in the commit: the wal-index's backfill count rose during the append, which left the
 *     log past the threshold at which the store's own connection checkpoints after a commit;
 *   - log restart: the log started over in this commit (which writes and syncs its header);
 *   - full-text indexing: the store's indexing timer ran during the append (an append waits for the
 *     event loop's check phase, its group commit, and a due timer runs first): the queue emptied;
 *   - preempted: the main thread waited in the run queue (another process had the CPU) for more than
 *     half of the append (Linux `/proc/self/schedstat`);
 *   - other.
 * Measured twice in the same run: with the store's background checkpoints (the default) and with
 * `backgroundCheckpoints: false` (a commit checkpoints past 1,000 pages, SQLite's default).
 * The wal-index header is read from the `-shm` file (mxFrame at byte 16, the checkpoint's nBackfill
 * at byte 96: https://sqlite.org/walformat.html). `BENCH_QUICK=1` uses the 100K scale, else 1M.
 */
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, readSync, rmSync } from "node:fs";
import { endianness, tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { createMemory } from "../src/create-memory.js";
import { BACKSTOP_PAGES } from "../src/stores/sqlite/_checkpointer.js";
import { createSqliteStore } from "../src/stores/sqlite/index.js";
import { collectGarbage, formatMicros, percentile, printTable, seededRandom } from "./_harness.js";
import { openSqliteRaw } from "./_raw-baselines.js";
import { loadStore, ROUNDS, SCALES, type Subject } from "./_store-bench.js";
import { messageOf, sessionIdOf } from "./_store-data.js";

const READS = 1_000;
const APPENDS = 200;
const WARMUP = 20;
const SLOW_US = 1_000;

/** One timed append: wall time, run-queue wait, and what the log did meanwhile. */
interface Sample {
  us: number;
  waitUs: number;
  checkpointInCommit: boolean;
  restart: boolean;
  indexed: boolean;
}

/** The main thread's run-queue wait so far, in µs; 0 where the kernel does not tell. */
const SCHEDSTAT = "/proc/self/schedstat";
const canAttribute = existsSync(SCHEDSTAT);
const runQueueWaitUs = () => (canAttribute ? Number(readFileSync(SCHEDSTAT, "utf8").split(" ")[1]) / 1000 : 0);

/** Reads the wal-index header of the database at `path`: frames in the log and frames copied back. */
function walIndex(path: string) {
  const header = Buffer.alloc(100);
  let fd: number | undefined;
  return {
    read(): { frames: number; backfilled: number } {
      fd ??= openSync(`${path}-shm`, "r");
      readSync(fd, header, 0, 100, 0);
      const le = endianness() === "LE";
      return {
        frames: le ? header.readUInt32LE(16) : header.readUInt32BE(16),
        backfilled: le ? header.readUInt32LE(96) : header.readUInt32BE(96),
      };
    },
    close: () => fd !== undefined && closeSync(fd),
  };
}

interface ModeResult {
  mode: string;
  memory: Sample[];
  raw: number[];
}

async function measureMode(background: boolean, root: string): Promise<ModeResult> {
  const scale = SCALES[1];
  const dir = mkdtempSync(join(root, background ? "background-" : "commit-"));
  const path = join(dir, "threadkeep.db");
  const store = createSqliteStore({ path, backgroundCheckpoints: background });
  const memory = createMemory({ store, ttlMs: 0, maxMessages: 200 });
  const raw = openSqliteRaw(scale, join(dir, "raw"));
  const wal = walIndex(path);
  let side: Database.Database | undefined;
  // Sessions waiting for the full-text index: fewer after an append than before it, and the indexer ran inside it.
  const pending = () => (side ??= new Database(path, { readonly: true })).prepare("SELECT count(*) FROM fts_queue").pluck().get() as number;
  // The store's own connection checkpoints past this many pages.
  const threshold = background ? BACKSTOP_PAGES : 1_000;
  try {
    await loadStore(store, scale, background ? "background checkpoints" : "checkpoints in commits");
    await raw.load(scale);
    const owner = (id: string) => `user-${Number.parseInt(id.slice(-12), 16) % 500}`;
    const api: Subject = {
      name: "Memory",
      last20: (id) => memory.getMessages(id, { last: 20, userId: owner(id) }),
      append1: (id, message) => memory.addMessages(id, [message], { userId: owner(id) }),
    };
    const ids = Array.from({ length: scale.sessions }, (_, s) => sessionIdOf(s));
    const result: ModeResult = { mode: background ? "background (default)" : "in the commit (SQLite default)", memory: [], raw: [] };
    for (let round = 0; round < ROUNDS; round++) {
      for (const subject of [raw.subject, api]) {
        const reads = seededRandom(1 + round);
        for (let i = 0; i < READS; i++) await subject.last20(ids[Math.floor(reads() * ids.length)]);
        const appends = seededRandom(100 + round);
        for (let i = 0; i < WARMUP + APPENDS; i++) {
          const id = ids[Math.floor(appends() * ids.length)];
          const message = messageOf(i, 1_000_000 + round * (WARMUP + APPENDS) + i);
          const before = subject === api ? wal.read() : undefined;
          const queued = subject === api ? pending() : 0;
          const waited = runQueueWaitUs();
          const started = performance.now();
          await subject.append1(id, message);
          const us = (performance.now() - started) * 1000;
          if (i < WARMUP) continue;
          if (subject !== api) {
            result.raw.push(us);
            continue;
          }
          const after = wal.read();
          const indexed = pending() < queued;
          result.memory.push({
            us,
            waitUs: runQueueWaitUs() - waited,
            checkpointInCommit: after.backfilled > before!.backfilled && after.frames >= threshold,
            restart: after.frames < before!.frames,
            indexed,
          });
        }
      }
    }
    return result;
  } finally {
    wal.close();
    side?.close();
    await memory.close();
    await raw.close();
    collectGarbage();
  }
}

function report(results: ModeResult[]): void {
  const sorted = (xs: number[]) => [...xs].sort((a, b) => a - b);
  const median = (xs: number[]) => (xs.length === 0 ? Number.NaN : percentile(sorted(xs), 50));
  printTable(
    ["checkpoints", "appends", "Memory p50", "Memory p99", "> 1 ms", "checkpoint in the commit", "log restart", "full-text indexing", "preempted", "other", "raw p99, same rounds"],
    results.map(({ mode, memory, raw }) => {
      const slow = memory.filter((s) => s.us > SLOW_US);
      const inCommit = slow.filter((s) => s.checkpointInCommit);
      const restarts = slow.filter((s) => !s.checkpointInCommit && s.restart);
      const indexing = slow.filter((s) => !s.checkpointInCommit && !s.restart && s.indexed);
      const rest = slow.filter((s) => !s.checkpointInCommit && !s.restart && !s.indexed);
      const preempted = rest.filter((s) => s.waitUs > s.us / 2);
      const cell = (xs: Sample[]) => (xs.length === 0 ? "0" : `${xs.length} (median ${formatMicros(median(xs.map((s) => s.us)))})`);
      const us = sorted(memory.map((s) => s.us));
      return [
        mode,
        memory.length.toLocaleString("en"),
        formatMicros(percentile(us, 50)),
        formatMicros(percentile(us, 99)),
        `${slow.length} (${((100 * slow.length) / memory.length).toFixed(1)}%)`,
        cell(inCommit),
        cell(restarts),
        cell(indexing),
        canAttribute ? cell(preempted) : "–",
        canAttribute ? cell(rest.filter((s) => s.waitUs <= s.us / 2)) : cell(rest),
        formatMicros(percentile(sorted(raw), 99)),
      ];
    }),
  );
  for (const { mode, memory } of results) {
    const all = memory.filter((s) => s.checkpointInCommit);
    const restarts = memory.filter((s) => s.restart);
    console.log(
      `${mode}: every append with a checkpoint in its commit: ${all.length} (median ${formatMicros(median(all.map((s) => s.us)))}); ` +
        `with a log restart: ${restarts.length} (median ${formatMicros(median(restarts.map((s) => s.us)))})`,
    );
  }
  if (!canAttribute) console.log(`(${SCHEDSTAT} is missing here: preemption is not told apart from "other")`);
}

async function main(): Promise<void> {
  const root = mkdtempSync(join(tmpdir(), "threadkeep-bench-sqlite-tail-"));
  try {
    const scale = SCALES[1];
    console.log(
      `# SQLite append tail at ${scale.sessions.toLocaleString("en")} sessions × ${scale.messagesPerSession}: ${ROUNDS} rounds of ` +
        `${READS.toLocaleString("en")} reads and ${APPENDS} appends (after ${WARMUP} untimed) per subject, raw and Memory interleaved\n`,
    );
    const results = [await measureMode(true, root), await measureMode(false, root)];
    console.log();
    report(results);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

await main();
