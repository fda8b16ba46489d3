/**
 * Profiling helper (not part of `npm run bench`): where a SQLite append's time goes, layer by layer.
 * The same one-message appends at random sessions, in interleaved rounds, through:
 *   - raw: the api bench's raw baseline (a prepared INSERT into a plain table, autocommit);
 *   - raw in a transaction: the same INSERT inside BEGIN IMMEDIATE … COMMIT (what a transaction adds);
 *   - store step: the store's append transaction called directly (no group commit, no promise);
 *   - store: `store.appendMessages` awaited (the contract call, as the api bench's "store" row);
 *   - Memory: `memory.addMessages` awaited (the public API).
 * Reports the main thread's CPU per append (`/proc/thread-self/schedstat`: on-CPU nanoseconds, so the
 * checkpoint worker and other processes are not counted) and the wall p50.
 *
 *   node --expose-gc --import tsx bench/_append-probe.ts
 *   SUBJECT=memory APPENDS=2000 node --import tsx bench/_append-probe.ts   one subject only (for callgrind:
 *     run it at two APPENDS and divide the difference of the instruction counts)
 *
 * `SESSIONS` (default 250) × 20 messages are loaded; `ROUNDS` (default 7) rounds of `APPENDS` (default 500).
 * `INDEXING=off` keeps the store's background full-text indexing out of the figures (it runs on the main
 * thread a second after a write, off the append's path; the process exits without closing the store,
 * which would index the rest).
 */
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { createMemory } from "../src/create-memory.js";
import { validateMessages } from "../src/core/messages.js";
import { LocalLeases } from "../src/stores/_lease.js";
import { openSqliteStoreDb } from "../src/stores/sqlite/_db.js";
import { encodeMessages } from "../src/stores/sqlite/_messages.js";
import { createSqliteStore } from "../src/stores/sqlite/index.js";
import { collectGarbage, formatMicros, percentile, printTable, seededRandom } from "./_harness.js";
import { loadStore, MAX_MESSAGES, type Scale } from "./_store-bench.js";
import { messageOf, sessionIdOf } from "./_store-data.js";

const SESSIONS = Number(process.env.SESSIONS ?? 250);
const ROUNDS = Number(process.env.ROUNDS ?? 7);
const APPENDS = Number(process.env.APPENDS ?? 500);
const ONLY = process.env.SUBJECT;
const INDEXING = process.env.INDEXING !== "off";
const scale: Scale = { label: `${SESSIONS * 20}`, sessions: SESSIONS, messagesPerSession: 20 };
const owner = (s: number) => `user-${s % 500}`;

/** The main thread's on-CPU time so far, in ns. */
const cpuNs = () => Number(readFileSync("/proc/thread-self/schedstat", "utf8").split(" ")[0]);

const dir = mkdtempSync(join(tmpdir(), "threadkeep-append-probe-"));
try {
  const path = join(dir, "store.db");
  const loading = createSqliteStore({ path, backgroundCheckpoints: false });
  await loadStore(loading, scale, "sqlite", 1);
  await loading.close();
  copyFileSync(path, join(dir, "step.db"));

  const store = createSqliteStore({ path, ...(INDEXING ? {} : { fullTextIndexDelayMs: 2 ** 31 - 1 }) });
  const memory = createMemory({ store, ttlMs: 0, maxMessages: MAX_MESSAGES });
  const step = openSqliteStoreDb({ path: join(dir, "step.db"), busyTimeoutMs: 5000, synchronous: "normal" }, new LocalLeases());

  const raw = new Database(join(dir, "raw.db"));
  raw.pragma("journal_mode = WAL");
  raw.pragma("synchronous = NORMAL");
  raw.exec("CREATE TABLE messages (session_id TEXT, seq INTEGER, body TEXT, PRIMARY KEY (session_id, seq))");
  const insert = raw.prepare("INSERT INTO messages (session_id, seq, body) VALUES (?, ?, ?)");
  raw.transaction(() => {
    for (let s = 0; s < SESSIONS; s++) for (let m = 0; m < 20; m++) insert.run(sessionIdOf(s), m + 1, JSON.stringify(messageOf(s, m)));
  })();
  const nextSeq = new Map<string, number>();
  const rawAppend = (id: string, message: unknown) => {
    const seq = nextSeq.get(id) ?? 21;
    nextSeq.set(id, seq + 1);
    insert.run(id, seq, JSON.stringify(message));
  };
  const rawInTx = raw.transaction(rawAppend);

  type ProbeSubject = { name: string; key: string; append: (s: number, i: number) => unknown };
  const subjects = ([
    { name: "raw INSERT", key: "raw", append: (s, i) => rawAppend(sessionIdOf(s), messageOf(s, i)) },
    { name: "raw INSERT in BEGIN IMMEDIATE", key: "rawtx", append: (s, i) => rawInTx.immediate(sessionIdOf(s), messageOf(s, i)) },
    {
      name: "store step (tx.append, sync)",
      key: "step",
      append: (s, i) =>
        step.tx.append(sessionIdOf(s), encodeMessages(validateMessages([messageOf(s, i)])), { maxMessages: MAX_MESSAGES, owner: { userId: owner(s) } }, Date.now()),
    },
    {
      name: "store.appendMessages",
      key: "store",
      append: (s, i) => store.appendMessages(sessionIdOf(s), [messageOf(s, i)], { maxMessages: MAX_MESSAGES, owner: { userId: owner(s) } }),
    },
    { name: "memory.addMessages", key: "memory", append: (s, i) => memory.addMessages(sessionIdOf(s), [messageOf(s, i)], { userId: owner(s) }) },
  ] as ProbeSubject[]).filter((subject) => !ONLY || ONLY.split(",").includes(subject.key));

  const cpu = subjects.map((): number[] => []);
  const wall = subjects.map((): number[] => []);
  for (let round = 0; round < ROUNDS; round++) {
    for (const [k, subject] of subjects.entries()) {
      const random = seededRandom(100 + round);
      const samples: number[] = [];
      // Warm-up, a tenth of the round.
      for (let i = 0; i < APPENDS / 10; i++) await subject.append(Math.floor(random() * SESSIONS), i);
      const before = cpuNs();
      for (let i = 0; i < APPENDS; i++) {
        const s = Math.floor(random() * SESSIONS);
        const start = performance.now();
        const result = subject.append(s, 1000 + i);
        if (result instanceof Promise) await result;
        samples.push((performance.now() - start) * 1000);
      }
      cpu[k].push((cpuNs() - before) / 1000 / APPENDS);
      wall[k].push(percentile(samples.sort((a, b) => a - b), 50));
      collectGarbage();
    }
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const rawCpu = median(cpu[0]);
  const rawWall = median(wall[0]);
  printTable(
    ["subject", "main-thread CPU / append (median round)", "wall p50 (median round)", "CPU / first row's", "wall / first row's"],
    subjects.map((subject, k) => [
      subject.name,
      formatMicros(median(cpu[k])),
      formatMicros(median(wall[k])),
      `${(median(cpu[k]) / rawCpu).toFixed(2)}×`,
      `${(median(wall[k]) / rawWall).toFixed(2)}×`,
    ]),
  );
  if (!INDEXING) {
    rmSync(dir, { recursive: true, force: true });
    process.exit(0);
  }
  await memory.close();
  step.close();
  raw.close();
} finally {
  rmSync(dir, { recursive: true, force: true });
}
