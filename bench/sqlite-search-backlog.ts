/**
 * A full-text search that meets a backlog: a schema v7 file of `BENCH_BACKLOG` messages (default
 * 200,000; 2,000 sessions × 100, one session in ten the searched owner's) opened by the current
 * store, whose upgrade leaves every message waiting; the background indexer is held off, so the
 * search indexes what it needs first (since the search was scoped: the owner's tenth). Prints the
 * search's wall and CPU time and the longest gap of a 5 ms timer while it ran, then the same for the
 * store's close, which meets the rest of the backlog (all of it with `BENCH_SEARCH=0`: no search)
 * (docs/BENCHMARKS.md, "SQLite: a search that meets a backlog").
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createSqliteStore } from "../src/stores/sqlite/index.js";
import { watchEventLoop } from "../test/_event-loop-gaps.js";
import { sqliteV7File } from "../test/_sqlite-v7-file.js";

const n = Number(process.env.BENCH_BACKLOG ?? 200_000);
const dir = mkdtempSync(join(tmpdir(), "threadkeep-bench-backlog-"));
const path = join(dir, "threadkeep.db");
const old = sqliteV7File(path);
old.transaction(() => {
  for (let s = 0; s < n / 100; s++) {
    const id = crypto.randomUUID();
    old.session(id, s % 10 ? "others" : "owner");
    for (let seq = 1; seq <= 100; seq++) old.message(id, seq, `waiting word${seq} in session ${s}`);
  }
});
old.close();

const store = createSqliteStore({ path, fullTextIndexDelayMs: 600_000 });
// Opens (and upgrades) the file before the clock starts.
await store.countMessages(crypto.randomUUID()).catch(() => 0);
/** Runs `fn` under a 5 ms timer: its wall and CPU time (ms) and the timer's longest gap. */
async function measure<T>(fn: () => Promise<T>) {
  const loop = watchEventLoop(5);
  const cpu = process.cpuUsage();
  const start = performance.now();
  const result = await fn();
  const wallMs = performance.now() - start;
  const used = process.cpuUsage(cpu);
  const maxGap = loop.stop();
  const ms = (x: number) => Math.round(x);
  return { result, wallMs: ms(wallMs), cpuMs: ms((used.user + used.system) / 1000), maxGapMs: ms(maxGap) };
}

// BENCH_SEARCH=0: no search, the close meets the whole backlog.
const searched = process.env.BENCH_SEARCH !== "0";
const search = await measure(async () => (searched ? store.search({ userId: "owner", text: "word7", mode: "fulltext", limit: 10_000 }) : []));
const close = await measure(() => store.close());
console.log(
  JSON.stringify({
    backlog: n,
    hits: search.result.length,
    wallMs: search.wallMs,
    cpuMs: search.cpuMs,
    maxGapMs: search.maxGapMs,
    closeWallMs: close.wallMs,
    closeCpuMs: close.cpuMs,
    closeMaxGapMs: close.maxGapMs,
  }),
);
rmSync(dir, { recursive: true, force: true });
