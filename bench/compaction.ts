/**
 * Store calls per proxied turn with summaries on, as `threadkeep serve` runs them (default window 20,
 * threshold 20, cap 200, compaction in the background): one 150-turn session through the HTTP server
 * and the fake upstream (which also writes the summaries), with every store call counted by method.
 * Counts, not times: they do not depend on the machine. SQLite in memory, and PostgreSQL when it is
 * reachable (THREADKEEP_TEST_POSTGRES_URL; a schema of its own, dropped after).
 */
import { randomBytes, randomUUID } from "node:crypto";
import { printTable } from "./_harness.js";
import type { FullStore } from "../src/core/types.js";

const TURNS = 150;
const SPAN = 50;

function counted(store: FullStore, calls: Map<string, number>): FullStore {
  return new Proxy(store, {
    get(target, prop) {
      const value = Reflect.get(target, prop, target);
      if (typeof value !== "function") return value;
      return (...args: unknown[]) => {
        calls.set(String(prop), (calls.get(String(prop)) ?? 0) + 1);
        return value.apply(target, args);
      };
    },
  });
}

async function run(name: string, store: FullStore): Promise<string[][]> {
  const { createMemory } = await import("../src/create-memory.js");
  const { createSummarizer } = await import("../src/llm/summarizer.js");
  const { createServer } = await import("../src/server/index.js");
  const { startFakeUpstream } = await import("../test/_fake-upstream.js");
  const calls = new Map<string, number>();
  const fake = await startFakeUpstream();
  const memory = createMemory({
    store: counted(store, calls),
    summarizer: createSummarizer({ baseUrl: fake.url }),
    compaction: { background: true },
  });
  const server = await createServer({ memory, upstream: fake.url, port: 0 });
  const url = await server.listen();
  const id = randomUUID();
  const rows: string[][] = [];
  for (let i = 1; i <= TURNS; i++) {
    const res = await fetch(`${url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-session-id": id },
      body: JSON.stringify({ model: "m", messages: [{ role: "user", content: `question ${i}` }] }),
    });
    await res.json();
    await memory.idle();
    if (i % SPAN > 0) continue;
    const all = [...calls.values()].reduce((a, b) => a + b, 0);
    const n = (method: string) => calls.get(method) ?? 0;
    const per = (count: number) => (count / SPAN).toFixed(2);
    rows.push([
      name,
      `${i - SPAN + 1}–${i}`,
      per(all),
      // Only a compaction check counts messages (with a cap); each turn's context reads the window
      // and the summaries once (in openTurn where the store combines them, else one call each), so
      // the reads beyond those are the checks' (and the summary batches').
      per(n("countMessages")),
      per(n("countMessages") + n("listSummaries") + n("getMessages") - (n("openTurn") > 0 ? 0 : 2 * SPAN)),
      per(calls.get("appendMessages") ?? 0),
      JSON.stringify(Object.fromEntries([...calls].sort())),
    ]);
    calls.clear();
  }
  await server.close();
  await memory.close();
  await fake.close();
  return rows;
}

const rows: string[][] = [];
const { createSqliteStore } = await import("../src/stores/sqlite/index.js");
rows.push(...(await run("sqlite", createSqliteStore({ path: ":memory:" }))));
const { serviceAvailable, TEST_POSTGRES_URL } = await import("../test/_services.js");
if ((await serviceAvailable("postgres")) === true) {
  const { createPostgresStore } = await import("../src/stores/postgres/index.js");
  const schema = `tk_bench_${randomBytes(6).toString("hex")}`;
  try {
    rows.push(...(await run("postgres", createPostgresStore({ url: TEST_POSTGRES_URL, schema }))));
  } finally {
    const { default: postgres } = await import("postgres");
    const sql = postgres(TEST_POSTGRES_URL, { onnotice: () => {} });
    await sql.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await sql.end();
  }
}
printTable(
  [
    "store",
    "turns",
    "store calls / turn",
    "compaction checks / turn",
    "compaction reads / turn",
    "appends / turn",
    "calls by method",
  ],
  rows,
);
