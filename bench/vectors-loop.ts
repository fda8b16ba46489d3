/**
 * `npm run bench -- vectors-loop`: does one user's large history hold everyone else up? One owner's
 * `BENCH_LOOP_SIZE` vectors (default 100,000, `BENCH_LOOP_DIMS` dimensions, default 768; drawn as in
 * the `vectors` bench) are searched for the first time, which indexes them (k-means cells in
 * sqlite-vec, sqlite/_vector-index.ts), while another user lists their sessions and appends a message
 * every 20 ms. Reported for the build in a worker thread (the default) and in the calling thread
 * (`vectorIndex.background: false`, what every build did before): the longest the event loop was held
 * during the first search and during the build after it, the other user's slowest list and slowest
 * append (a write, which waits for the build's write transactions), and the build's wall time.
 *
 * Runs the built package (`npm run build` first): the store's worker loads `dist/`.
 *
 * `BENCH_VECTORS_DB=<folder>` keeps the filled database for later runs (as the `vectors` bench);
 * `BENCH_QUICK=1`: 20,000 vectors of 256 dimensions.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { newSessionId } from "../src/core/ids.js";
// The built package: the store's build worker loads compiled code (under `node --import tsx`, which
// runs the benches, a worker cannot register tsx's loader again on Node 20). `npm run build` first.
import { createSqliteStore } from "../dist/stores/sqlite/index.js";
import { watchEventLoop } from "../test/_event-loop-gaps.js";
import { printTable, QUICK } from "./_harness.js";
import { filledDatabase, MODEL } from "./_vectors-data.js";

const SIZE = Number(process.env.BENCH_LOOP_SIZE ?? (QUICK ? 20_000 : 100_000));
const DIMS = Number(process.env.BENCH_LOOP_DIMS ?? (QUICK ? 256 : 768));
const keep = process.env.BENCH_VECTORS_DB;
const folder = keep ?? mkdtempSync(join(tmpdir(), "threadkeep-bench-vectors-loop-"));

/** Drops the owner's index, so each run builds it from nothing. */
function dropIndex(path: string): void {
  const db = new Database(path);
  try {
    if (db.prepare("SELECT 1 FROM sqlite_master WHERE name = 'vector_index_owners'").get())
      db.exec("DELETE FROM vector_index_owners");
  } finally {
    db.close();
  }
}

function indexedSize(path: string): number {
  const db = new Database(path, { readonly: true });
  try {
    if (!db.prepare("SELECT 1 FROM sqlite_master WHERE name = 'vector_index_owners'").get()) return 0;
    return (
      (db.prepare("SELECT size FROM vector_index_owners WHERE user_id = 'big'").pluck().get() as number | undefined) ??
      0
    );
  } finally {
    db.close();
  }
}

const nextTask = () => new Promise((resolve) => setTimeout(resolve, 1));

async function measure(path: string, background: boolean, query: Float32Array) {
  dropIndex(path);
  const store = createSqliteStore({ path, backgroundCheckpoints: false, vectorIndex: { background } });
  const other = newSessionId();
  await store.createSession({ id: other, userId: `other-${other}` });
  let slowest = 0;
  let slowestAppend = 0;
  let stop = false;
  const lister = (async () => {
    while (!stop) {
      let started = performance.now();
      await store.listSessions(`other-${other}`);
      slowest = Math.max(slowest, performance.now() - started);
      started = performance.now();
      await store.appendMessages(other, [{ role: "user", content: "meanwhile" }]);
      slowestAppend = Math.max(slowestAppend, performance.now() - started);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  })();
  await nextTask();
  const start = performance.now();
  const first = watchEventLoop(5);
  await store.searchVectors({ userId: "big", model: MODEL, vector: query, limit: 10 });
  await nextTask();
  const firstHold = first.stop();
  const build = watchEventLoop(5);
  while (indexedSize(path) < SIZE) {
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  const buildSeconds = (performance.now() - start) / 1000;
  await nextTask();
  await store.searchVectors({ userId: "big", model: MODEL, vector: query, limit: 10 });
  await nextTask();
  const buildHold = build.stop();
  stop = true;
  await lister;
  await store.close();
  return { firstHold, buildHold, slowest, slowestAppend, buildSeconds };
}

try {
  console.error(`filling ${SIZE.toLocaleString("en")} vectors of ${DIMS} dimensions (kept: ${keep ?? "no"})`);
  const filled = await filledDatabase({
    folder,
    dims: DIMS,
    size: SIZE,
    queries: 1,
    smallOwners: [],
    centres: 256,
    spread: 1,
  });
  console.error(`filled in ${filled.fillSeconds.toFixed(0)} s`);
  const rows: string[][] = [];
  for (const background of [true, false]) {
    const r = await measure(filled.path, background, filled.queries[0]);
    rows.push([
      background ? "worker thread (default)" : "calling thread (background: false)",
      `${Math.round(r.firstHold)} ms`,
      `${Math.round(r.buildHold)} ms`,
      `${Math.round(r.slowest)} ms`,
      `${Math.round(r.slowestAppend)} ms`,
      `${r.buildSeconds.toFixed(1)} s`,
    ]);
  }
  console.log(
    `\n${SIZE.toLocaleString("en")} vectors × ${DIMS} dims; another user lists sessions and appends every 20 ms. ${cpus().length} cores, load ${loadavg()[0].toFixed(1)}`,
  );
  printTable(
    [
      "build",
      "longest hold: first search",
      "longest hold: build after it",
      "other user's slowest list",
      "other user's slowest append",
      "build (wall)",
    ],
    rows,
  );
} finally {
  if (!keep) rmSync(folder, { recursive: true, force: true });
}
