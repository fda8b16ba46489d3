/**
 * `npm run bench -- search-loop`: does a search over one large SQLite owner hold everyone else up?
 * One owner's `BENCH_SEARCH_LOOP_MESSAGES` messages (default 1,000,000; `BENCH_QUICK=1`: 100,000), in
 * sessions of 200, every one holding the query's words, are searched without a `sessionId` by
 * relevance, full text (newest first) and substring, two rounds each, on the same file with the
 * store's search thread (`searchThread`, the default: `sqlite/_search-reader.ts`) and without it (what
 * every such search did before). Reported: the longest the event loop was held during each search
 * (`test/_event-loop-gaps.ts`: a 5 ms timer's longest gap, the thread's wait for a core taken off) and
 * how long the search took. Figures: docs/benchmarks.md, "Event loop".
 */
import { mkdtempSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { newSessionId } from "../src/core/ids.js";
import type { FullStore, SearchQuery } from "../src/core/types.js";
import { createSqliteStore } from "../src/stores/sqlite/index.js";
import { watchEventLoop } from "../test/_event-loop-gaps.js";
import { printTable, QUICK } from "./_harness.js";

const MESSAGES = Number(process.env.BENCH_SEARCH_LOOP_MESSAGES ?? (QUICK ? 100_000 : 1_000_000));
const PER_SESSION = 200;
const ROUNDS = 2;

const folder = mkdtempSync(join(tmpdir(), "threadkeep-bench-search-loop-"));
const path = join(folder, "threadkeep.db");
const queries: [string, SearchQuery][] = [
  ["relevance", { userId: "big", text: "apples weather", ranking: "relevance", limit: 10 }],
  ["full text, newest first", { userId: "big", text: "apples pears", mode: "fulltext", limit: 10 }],
  ["substring", { userId: "big", text: "the weather in", mode: "substring", limit: 10 }],
];

async function fill(store: FullStore): Promise<void> {
  for (let s = 0; s * PER_SESSION < MESSAGES; s++) {
    const id = newSessionId();
    await store.createSession({ id, userId: "big" });
    await store.appendMessages(
      id,
      Array.from({ length: PER_SESSION }, (_, i) => ({
        role: i % 2 ? ("assistant" as const) : ("user" as const),
        content: `message ${i} of session ${s}: apples, pears and the weather in spring`,
      })),
    );
  }
  // Indexed for full text before the rounds, so no round pays the indexing.
  await store.search({ userId: "big", text: "apples", mode: "fulltext", limit: 1 });
}

async function main(): Promise<void> {
  const threaded = createSqliteStore({ path });
  const inline = createSqliteStore({ path, searchThread: false });
  try {
    const t0 = performance.now();
    await fill(threaded);
    console.log(
      `filled ${MESSAGES.toLocaleString("en")} messages in ${((performance.now() - t0) / 1000).toFixed(1)} s`,
    );
    const rows = new Map<string, { hold: number[]; took: number[] }>();
    for (let round = 0; round < ROUNDS; round++) {
      for (const [how, store] of [
        ["search thread", threaded],
        ["store's thread", inline],
      ] as const) {
        for (const [name, query] of queries) {
          const watch = watchEventLoop(5);
          const started = performance.now();
          await store.search(query);
          const took = performance.now() - started;
          const row = rows.get(`${name}\n${how}`) ?? { hold: [], took: [] };
          row.hold.push(watch.stop());
          row.took.push(took);
          rows.set(`${name}\n${how}`, row);
        }
      }
    }
    const range = (xs: number[]) => `${Math.round(Math.min(...xs))}–${Math.round(Math.max(...xs))} ms`;
    console.log(
      `\nSQLite search over one owner of ${MESSAGES.toLocaleString("en")} messages, ${ROUNDS} rounds, ${new Date().toISOString()}, load ${loadavg()
        .map((l) => l.toFixed(1))
        .join(" ")}:\n`,
    );
    printTable(
      ["search", "runs on", "longest hold of the loop", "search took"],
      [...rows].map(([key, { hold, took }]) => [...key.split("\n"), range(hold), range(took)]),
    );
  } finally {
    await inline.close();
    await threaded.close();
    rmSync(folder, { recursive: true, force: true });
  }
}

await main();
