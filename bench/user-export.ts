/**
 * A person's download of their data (`GET /v1/users/me/export`) from a SQLite store holding 100,000
 * of their messages: one session of 50,000 messages and 50 of 1,000, each message ~250 bytes. Reports
 * the time to stream the whole file, its size, and the live heap of the process (server and reading
 * client both) sampled after a forced GC every 5,000 lines, against the same measure before the
 * request: the route writes as it reads, a page of messages at a time, so the growth stays far below
 * the file's size.
 *
 * Run with `npm run bench -- user-export` (the runner passes --expose-gc). `BENCH_QUICK=1`: 10,000 messages.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { createMemory } from "../src/create-memory.js";
import { createServer } from "../src/server/index.js";
import { headerLine } from "../src/transfer/jsonl-format.js";
import { printTable, QUICK } from "./_harness.js";

const TOTAL = QUICK ? 10_000 : 100_000;
const BIG = TOTAL / 2;
const SMALL_SESSIONS = 50;
const USER = "bench";
const SAMPLE_EVERY = 5_000;

/** The collector, from --expose-gc or, when run without it, enabled here. */
const gc: () => void =
  (globalThis as { gc?: () => void }).gc ??
  (() => {
    setFlagsFromString("--expose-gc");
    return runInNewContext("gc") as () => void;
  })();
const liveHeap = () => {
  gc();
  return process.memoryUsage().heapUsed;
};
const mb = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MB`;

const dir = mkdtempSync(join(tmpdir(), "tk-bench-export-"));
try {
  const memory = createMemory({ store: `sqlite:${join(dir, "export.db")}`, ttlMs: 0, defaultUserId: USER });
  const store = await memory.store();
  const seedStart = performance.now();
  const filler = "x".repeat(200);
  const seed = async (id: string, count: number) => {
    await store.createSession({ id, userId: USER });
    for (let done = 0; done < count; done += 1_000) {
      const batch = Array.from({ length: Math.min(1_000, count - done) }, (_, i) => ({
        role: (done + i) % 2 === 0 ? ("user" as const) : ("assistant" as const),
        content: `message ${done + i} ${filler}`,
      }));
      await store.appendMessages(id, batch);
    }
  };
  await seed(crypto.randomUUID(), BIG);
  for (let i = 0; i < SMALL_SESSIONS; i++) await seed(crypto.randomUUID(), (TOTAL - BIG) / SMALL_SESSIONS);
  await store.addUserMemory({ userId: USER, text: "prefers short answers" });
  console.log(`seeded ${TOTAL.toLocaleString("en")} messages in ${Math.round(performance.now() - seedStart)} ms`);

  // Without API keys every caller is the default user: the seeded one.
  const server = await createServer({ memory, port: 0 });
  const url = await server.listen();
  const before = liveHeap();
  let peak = before;
  let lines = 0;
  let bytes = 0;
  let first = "";
  let partial = "";
  const start = performance.now();
  const response = await fetch(`${url}/v1/users/me/export`);
  if (!response.ok || !response.body) throw new Error(`HTTP ${response.status}`);
  const decoder = new TextDecoder();
  for await (const chunk of response.body) {
    bytes += chunk.byteLength;
    const text = partial + decoder.decode(chunk, { stream: true });
    const parts = text.split("\n");
    partial = parts.pop() ?? "";
    for (const line of parts) {
      if (lines === 0) first = line;
      lines++;
      if (lines % SAMPLE_EVERY === 0) peak = Math.max(peak, liveHeap());
    }
  }
  const ms = performance.now() - start;
  peak = Math.max(peak, liveHeap());
  if (first !== headerLine()) throw new Error(`unexpected first line: ${first.slice(0, 100)}`);
  if (partial !== "") throw new Error("the export ended without its last newline");
  // Again without the sampling, for the time alone.
  const plainStart = performance.now();
  const again = await fetch(`${url}/v1/users/me/export`);
  let againBytes = 0;
  for await (const chunk of again.body!) againBytes += chunk.byteLength;
  const plainMs = performance.now() - plainStart;
  if (againBytes !== bytes) throw new Error(`second export: ${againBytes} bytes, first ${bytes}`);
  await server.close();
  await memory.close();

  printTable(
    [
      "messages",
      "lines",
      "file",
      "time",
      "time (sampling heap)",
      "live heap before",
      "peak live heap while streaming",
      "growth",
    ],
    [
      [
        TOTAL.toLocaleString("en"),
        lines.toLocaleString("en"),
        mb(bytes),
        `${Math.round(plainMs)} ms`,
        `${Math.round(ms)} ms`,
        mb(before),
        mb(peak),
        mb(peak - before),
      ],
    ],
  );
  console.log("(live heap: after a forced GC, every 5,000 lines, on the first pass; the second pass only reads)");
} finally {
  rmSync(dir, { recursive: true, force: true });
}
