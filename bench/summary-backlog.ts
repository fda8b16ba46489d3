/**
 * The summary backlog after an outage: sessions chat on (a turn, a short pause, the next) while the
 * summary model is down for 10 s, then up again. How long after it is back do turns still answer
 * `history-omitted`? Measured per session, from the restore to its last turn that warned, with the
 * server as `serve --max-messages 20` runs it (background compaction, SQLite), in this process; the fake
 * upstream answers at once.
 *
 * `BENCH_BACKLOG_OUTAGE_S` (10), `BENCH_BACKLOG_SESSIONS` (8), `BENCH_BACKLOG_PAUSE_MS` (50),
 * `BENCH_BACKLOG_HARD_CAP` (the ceiling, `compaction.hardCap`; unset: the default, twice the cap; 0: none, as before).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { createMemory } from "../src/create-memory.js";
import { createSummarizer, DEFAULT_SUMMARY_INSTRUCTIONS } from "../src/llm/summarizer.js";
import { createServer } from "../src/server/index.js";
import { startFakeUpstream } from "../test/_fake-upstream.js";
import { printTable } from "./_harness.js";

const OUTAGE_S = Number(process.env.BENCH_BACKLOG_OUTAGE_S ?? 10);
const SESSIONS = Number(process.env.BENCH_BACKLOG_SESSIONS ?? 8);
const PAUSE_MS = Number(process.env.BENCH_BACKLOG_PAUSE_MS ?? 50);
const HARD_CAP =
  process.env.BENCH_BACKLOG_HARD_CAP === undefined ? undefined : Number(process.env.BENCH_BACKLOG_HARD_CAP);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const fake = await startFakeUpstream();
let down = false;
fake.setReply((body) => {
  if (body?.messages?.[0]?.content !== DEFAULT_SUMMARY_INSTRUCTIONS) return {};
  return down
    ? { status: 503, error: { message: "summary model down" } }
    : { content: "The user asked numbered questions." };
});
const dir = mkdtempSync(join(tmpdir(), "tk-bench-backlog-"));
const memory = createMemory({
  store: `sqlite:${join(dir, "backlog.db")}`,
  maxMessages: 20,
  summarizer: createSummarizer({ baseUrl: fake.url }),
  compaction: { background: true, hardCap: HARD_CAP },
});
const server = await createServer({ memory, upstream: fake.url, fairShare: false, port: 0, logger: false });
const url = await server.listen();
const warn = console.warn;
console.warn = () => {};
console.log(
  `summary backlog: ${SESSIONS} sessions, a turn every ~${PAUSE_MS} ms each, summary model down ${OUTAGE_S} s; --max-messages 20, ceiling ${HARD_CAP ?? "40 (default)"}, background compaction, SQLite; ${cpus().length} cores, load average ${loadavg()[0].toFixed(1)}\n`,
);

interface Log {
  at: number;
  warned: boolean;
  stored: number;
}
let restoredAt = Number.POSITIVE_INFINITY;
let stopAt = Number.POSITIVE_INFINITY;
const chat = async (): Promise<Log[]> => {
  const id = crypto.randomUUID();
  const log: Log[] = [];
  for (let i = 1; performance.now() < stopAt; i++) {
    const res = await fetch(`${url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-session-id": id },
      body: JSON.stringify({ model: "m", messages: [{ role: "user", content: `question ${i}` }] }),
    });
    await res.arrayBuffer();
    log.push({
      at: performance.now(),
      warned: res.headers.get("x-threadkeep-warning") === "history-omitted",
      stored: 0,
    });
    await sleep(PAUSE_MS);
  }
  log.at(-1)!.stored = (await memory.getMessages(id)).length;
  return log;
};
const chats = Array.from({ length: SESSIONS }, chat);
// Warm: every session past its first summary before the outage.
await sleep(8000);
down = true;
await sleep(OUTAGE_S * 1000);
down = false;
restoredAt = performance.now();
stopAt = restoredAt + 30_000;
const logs = await Promise.all(chats);
console.warn = warn;
const rows = logs.map((log, i) => {
  const during = log.filter((l) => l.at < restoredAt);
  const after = log.filter((l) => l.at >= restoredAt);
  const lastWarned = after.filter((l) => l.warned).at(-1);
  return [
    String(i + 1),
    String(during.filter((l) => l.warned).length),
    String(after.length),
    String(after.filter((l) => l.warned).length),
    lastWarned ? `${((lastWarned.at - restoredAt) / 1000).toFixed(2)} s` : "none",
    String(log.at(-1)!.stored),
  ];
});
printTable(
  [
    "session",
    "warned during outage",
    "turns after restore",
    "warned after",
    "last warning after restore",
    "stored at end",
  ],
  rows,
);
await server.close();
await memory.close();
await fake.close();
rmSync(dir, { recursive: true, force: true });
