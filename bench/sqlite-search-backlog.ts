/**
 * A full-text search that meets a backlog: a schema v7 file of `BENCH_BACKLOG` messages (default
 * 200,000; 2,000 sessions × 100, one session in ten the searched owner's) opened by the current
 * store, whose upgrade leaves every message waiting; the background indexer is held off, so the
 * search indexes all of it first. Prints the search's wall and CPU time and the longest gap of a
 * 5 ms timer while it ran (docs/BENCHMARKS.md, "SQLite: a search that meets a backlog").
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openSqliteDatabase } from "../src/stores/sqlite/_schema.js";
import { createSqliteStore } from "../src/stores/sqlite/index.js";

const n = Number(process.env.BENCH_BACKLOG ?? 200_000);
const dir = mkdtempSync(join(tmpdir(), "threadkeep-bench-backlog-"));
const path = join(dir, "threadkeep.db");
const old = openSqliteDatabase({ path, busyTimeoutMs: 100, synchronous: "normal", targetVersion: 7 });
const session = old.prepare("INSERT INTO sessions (id, user_id, created_at, last_activity_at) VALUES (?, ?, 1, 1)");
const message = old.prepare("INSERT INTO messages (session_id, seq, created_at, body) VALUES (?, ?, 1, ?)");
const text = old.prepare("INSERT INTO message_text (session_id, seq, search_text) VALUES (?, ?, ?)");
old.transaction(() => {
  for (let s = 0; s < n / 100; s++) {
    const id = crypto.randomUUID();
    session.run(id, s % 10 ? "others" : "owner");
    for (let seq = 1; seq <= 100; seq++) {
      const words = `waiting word${seq} in session ${s}`;
      message.run(id, seq, JSON.stringify({ role: "user", content: words }));
      text.run(id, seq, words);
    }
  }
})();
old.close();

const store = createSqliteStore({ path, fullTextIndexDelayMs: 600_000 });
// Opens (and upgrades) the file before the clock starts.
await store.countMessages(crypto.randomUUID()).catch(() => 0);
let last = performance.now();
let maxGap = 0;
const timer = setInterval(() => {
  const now = performance.now();
  maxGap = Math.max(maxGap, now - last);
  last = now;
}, 5);
const cpu = process.cpuUsage();
const start = performance.now();
const hits = await store.search({ userId: "owner", text: "word7", mode: "fulltext", limit: 10_000 });
const wallMs = performance.now() - start;
const used = process.cpuUsage(cpu);
maxGap = Math.max(maxGap, performance.now() - last);
clearInterval(timer);
const ms = (x: number) => Math.round(x);
console.log(JSON.stringify({ backlog: n, hits: hits.length, wallMs: ms(wallMs), cpuMs: ms((used.user + used.system) / 1000), maxGapMs: ms(maxGap) }));
await store.close();
rmSync(dir, { recursive: true, force: true });
