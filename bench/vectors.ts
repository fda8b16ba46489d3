/**
 * `npm run bench -- vectors`: semantic search of one owner holding many messages, on SQLite: the
 * exact scan against the IVF index re-scored exactly (`vectorIndex`, sqlite/_vector-index.ts), in one
 * run: p50/p90 latency and CPU time, recall@10 against the exact answer for each number of probed
 * cells, the index's build time and size, and the process's memory; then the owner size at which the
 * index starts to pay (the default `minOwnerVectors`).
 *
 * Vectors are drawn from a Gaussian mixture (`BENCH_VECTORS_CENTRES` centres, 256 by default, each a
 * random direction; a message is its centre plus isotropic noise of norm `BENCH_VECTORS_SPREAD` (1.0:
 * a message's cosine to its centre is about 0.7), normalised), queries from the same mixture. The exact
 * top 10 of every query is computed while the store is filled, and checked against the store's own
 * exact scan for the queries timed on it.
 *
 * PostgreSQL's exact scan at the sizes of `BENCH_VECTORS_POSTGRES` (e.g. `20000,50000`; off by
 * default); `BENCH_VECTORS_SQLITE=0` skips SQLite. `--store postgres`: PostgreSQL's IVF index at
 * `BENCH_VECTORS_SIZE` (see {@link postgresIndexed}), with `BENCH_VECTORS_PG_SCHEMA=<name>` (keep the
 * filled schema and reuse it: the same size is measured again, a larger one topped up from the largest
 * saved fill), `BENCH_VECTORS_PG_FILL_ONLY=1` (fill, save, stop), `BENCH_VECTORS_PG_REBUILD=0` (search
 * the kept schema's index as it is), `BENCH_VECTORS_PG_EXACT` (exact scans timed, default 3; 0 none),
 * `BENCH_VECTORS_FILL_CONCURRENCY` (sessions written at once, default 1).
 *
 * `BENCH_VECTORS_SIZE` (default 100,000; the 1M figures in docs/benchmarks/vectors.md use 1000000),
 * `BENCH_VECTORS_DIMS` (default `768,1536`), `BENCH_VECTORS_QUERIES` (default 100),
 * `BENCH_VECTORS_PROBES` (default `4,8,12,16,24`), `BENCH_VECTORS_CANDIDATES` (default `64`), `BENCH_VECTORS_DB=<folder>` (keep the filled
 * database there and reuse it in later runs: a million vectors take 20–40 minutes to write; its index
 * is dropped and built again each run), `BENCH_VECTORS_CROSSOVER=0` (no small owners), `BENCH_QUICK=1` (20,000 vectors, 768 dimensions). Sessions
 * hold 100 messages each, all of one owner.
 */
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import * as sqliteVec from "sqlite-vec";
import type { VectorStore } from "../src/core/types.js";
import { createSqliteStore, type SqliteVectorIndexOptions } from "../src/stores/sqlite/index.js";
import { openBenchStore } from "./_recall-stores.js";
import { collectGarbage, formatMicros, percentile, printTable, QUICK } from "./_harness.js";
import { fill, filledDatabase, K, mixture, MODEL, Truth } from "./_vectors-data.js";

const SIZE = Number(process.env.BENCH_VECTORS_SIZE ?? (QUICK ? 20_000 : 100_000));
const DIMS = (process.env.BENCH_VECTORS_DIMS ?? (QUICK ? "768" : "768,1536")).split(",").map(Number);
const QUERIES = Number(process.env.BENCH_VECTORS_QUERIES ?? (QUICK ? 20 : 100));
const CENTRES = Number(process.env.BENCH_VECTORS_CENTRES ?? 256);
const SPREAD = Number(process.env.BENCH_VECTORS_SPREAD ?? 1);
const PROBES = (process.env.BENCH_VECTORS_PROBES ?? "4,8,12,16,24").split(",").map(Number);
const CANDIDATES = (process.env.BENCH_VECTORS_CANDIDATES ?? "64").split(",").map(Number);
/** Exact scans timed at the full size (each reads every vector: seconds at 1M). */
const EXACT_QUERIES = Number(process.env.BENCH_VECTORS_EXACT_QUERIES ?? (SIZE >= 500_000 ? 3 : 20));
const CROSSOVER = process.env.BENCH_VECTORS_CROSSOVER !== "0";
const SMALL_OWNERS = CROSSOVER ? [1_000, 2_000, 5_000, 10_000, 20_000].filter((n) => n < SIZE) : [];

const mib = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(0)} MiB`;
const rss = () => process.memoryUsage().rss;

async function timeSearches(store: VectorStore, owner: string, queries: Float32Array[], limit = K) {
  const samples: number[] = [];
  const cpu: number[] = [];
  const results: string[][] = [];
  for (const q of queries) {
    const start = performance.now();
    const used = process.cpuUsage();
    const hits = await store.searchVectors({ userId: owner, model: MODEL, vector: q, limit });
    const spent = process.cpuUsage(used);
    samples.push(performance.now() - start);
    cpu.push((spent.user + spent.system) / 1000);
    results.push(hits.map((h) => `${h.sessionId}:${h.seq}`));
  }
  samples.sort((a, b) => a - b);
  cpu.sort((a, b) => a - b);
  return {
    p50: percentile(samples, 50) * 1000,
    p90: percentile(samples, 90) * 1000,
    cpu50: percentile(cpu, 50) * 1000,
    results,
  };
}

function recall(results: string[][], truths: Truth[]): number {
  let found = 0;
  let total = 0;
  results.forEach((r, i) => {
    const want = new Set(truths[i].keys);
    total += want.size;
    found += r.filter((key) => want.has(key)).length;
  });
  return found / total;
}

/** Runs `fn` on the file with sqlite-vec loaded. */
function withExtension<T>(path: string, fn: (db: Database.Database) => T): T {
  const db = new Database(path);
  try {
    sqliteVec.load(db);
    return fn(db);
  } finally {
    db.close();
  }
}

/** Drops the vector index a previous run built in a kept database (so this run measures the build). */
function dropIndex(path: string): void {
  withExtension(path, (db) => {
    const names = db
      .prepare(
        "SELECT type, name, sql FROM sqlite_master WHERE name LIKE 'vector_index%' OR name LIKE 'message_vectors_index%'",
      )
      .all() as {
      type: string;
      name: string;
      sql: string | null;
    }[];
    for (const { type, name, sql } of names) {
      if (type === "trigger") db.exec(`DROP TRIGGER IF EXISTS "${name}"`);
      else if (type === "table" && sql?.startsWith("CREATE VIRTUAL TABLE")) db.exec(`DROP TABLE IF EXISTS "${name}"`);
    }
    for (const { type, name } of names) if (type === "table") db.exec(`DROP TABLE IF EXISTS "${name}"`);
  });
}

/** Bytes of the index's tables (sqlite's dbstat, one table at a time so it reads only theirs). */
function indexBytes(path: string): number {
  return withExtension(path, (db) => {
    const names = db
      .prepare(
        "SELECT name FROM sqlite_master WHERE name LIKE 'vector_index%' AND (type = 'index' OR sql NOT LIKE 'CREATE VIRTUAL%')",
      )
      .pluck()
      .all() as string[];
    const size = db.prepare("SELECT coalesce(sum(pgsize), 0) FROM dbstat WHERE name = ?").pluck();
    return names.reduce((sum, name) => sum + (size.get(name) as number), 0);
  });
}

async function run(dims: number) {
  const kept = process.env.BENCH_VECTORS_DB;
  const folder = kept ?? mkdtempSync(join(tmpdir(), "tk-bench-vectors-"));
  const open = (path: string, vectorIndex: SqliteVectorIndexOptions | false) =>
    createSqliteStore({ path, vectorIndex, backgroundCheckpoints: false });
  try {
    const data = await filledDatabase({
      folder,
      dims,
      size: SIZE,
      queries: QUERIES,
      smallOwners: SMALL_OWNERS,
      centres: CENTRES,
      spread: SPREAD,
    });
    const { path, queries, truths } = data;
    dropIndex(path);
    console.error(
      `  ${dims} dims: ${SIZE.toLocaleString("en")} vectors (fill ${data.fillSeconds.toFixed(0)} s); rss ${mib(rss())}`,
    );
    collectGarbage();

    const exact = open(path, false);
    const exactRun = await timeSearches(exact, "big", queries.slice(0, EXACT_QUERIES));
    await exact.close();
    const agree = recall(exactRun.results, truths);
    console.error(
      `  exact: p50 ${formatMicros(exactRun.p50)} (CPU ${formatMicros(exactRun.cpu50)}); agrees with the computed top ${K}: ${agree.toFixed(3)}; rss ${mib(rss())}`,
    );

    // The first search by the indexed store scans exactly and then indexes the owner.
    const rssBefore = rss();
    const indexed = open(path, { minOwnerVectors: 1 });
    let start = performance.now();
    let used = process.cpuUsage();
    await indexed.searchVectors({ userId: "big", model: MODEL, vector: queries[0], limit: K });
    const buildSeconds = (performance.now() - start) / 1000;
    const buildCpu = process.cpuUsage(used);
    await indexed.close();
    const rssBuilt = rss();
    const peakBuild = process.resourceUsage().maxRSS * 1024;
    console.error(
      `  first search (exact scan + index build): ${buildSeconds.toFixed(1)} s, CPU ${((buildCpu.user + buildCpu.system) / 1e6).toFixed(1)} s; rss ${mib(rssBuilt)}`,
    );

    const rows: string[][] = [];
    rows.push([
      `${dims}`,
      "exact scan",
      "–",
      "–",
      formatMicros(exactRun.p50),
      formatMicros(exactRun.p90),
      formatMicros(exactRun.cpu50),
      agree.toFixed(3),
    ]);
    for (const candidates of CANDIDATES) {
      for (const probes of PROBES) {
        const store = open(path, { minOwnerVectors: Number.MAX_SAFE_INTEGER, probes, candidates });
        start = performance.now();
        used = process.cpuUsage();
        await timeSearches(store, "big", queries.slice(0, 3)); // warm-up (the first reads the centroids)
        const r = await timeSearches(store, "big", queries);
        rows.push([
          `${dims}`,
          "IVF + re-score",
          `${probes}`,
          `${candidates}`,
          formatMicros(r.p50),
          formatMicros(r.p90),
          formatMicros(r.cpu50),
          recall(r.results, truths).toFixed(3),
        ]);
        console.error(`  ${rows.at(-1)!.join(" | ")}`);
        await store.close();
      }
    }
    const peak = process.resourceUsage().maxRSS * 1024;
    console.log(
      `\n${dims} dimensions, ${SIZE.toLocaleString("en")} vectors in one owner (${CENTRES} centres, spread ${SPREAD}), ` +
        `${QUERIES} queries (exact: ${EXACT_QUERIES}), limit ${K}:\n`,
    );
    printTable(["dims", "path", "probes", "candidates", "p50", "p90", "CPU p50", `recall@${K}`], rows);
    console.log(
      `\nfill ${data.fillSeconds.toFixed(0)} s; first indexed search (exact scan + training + build) ${buildSeconds.toFixed(1)} s ` +
        `(CPU ${((buildCpu.user + buildCpu.system) / 1e6).toFixed(1)} s); database ${mib(statSync(path).size)}, of which the index ` +
        `${mib(indexBytes(path))}; process RSS ${mib(rssBefore)} before the build, ${mib(rssBuilt)} after, peak ${mib(peakBuild)} ` +
        `through the build, ${mib(peak)} through the run`,
    );

    // Where the index starts to pay: exact against indexed at small owner sizes (same database).
    const small: string[][] = [];
    const exactSmall = open(path, false);
    const indexedSmall = open(path, { minOwnerVectors: 1 });
    for (const n of SMALL_OWNERS) {
      const owner = `small-${n}`;
      await indexedSmall.searchVectors({ userId: owner, model: MODEL, vector: queries[0], limit: K }); // builds
      const e = await timeSearches(exactSmall, owner, queries.slice(0, 20));
      const x = await timeSearches(indexedSmall, owner, queries.slice(0, 20));
      let same = 0;
      e.results.forEach((r, i) => (same += r.filter((key) => x.results[i].includes(key)).length));
      small.push([
        `${n.toLocaleString("en")}`,
        formatMicros(e.p50),
        formatMicros(e.cpu50),
        formatMicros(x.p50),
        formatMicros(x.cpu50),
        (same / (20 * K)).toFixed(3),
      ]);
    }
    await indexedSmall.close();
    await exactSmall.close();
    if (small.length > 0) {
      console.log(`\nOwner size where the index pays (${dims} dims, default probes and candidates, 20 queries):\n`);
      printTable(["owner's vectors", "exact p50", "exact CPU p50", "index p50", "index CPU p50", "recall@10"], small);
    }
  } finally {
    if (!kept) rmSync(folder, { recursive: true, force: true });
    collectGarbage();
  }
}

/**
 * PostgreSQL's exact scan (its only path: pgvector is not used) at the sizes of `BENCH_VECTORS_POSTGRES`
 * (e.g. `20000,50000`), in one owner, 768 dimensions: the figures to extrapolate its bound from.
 */
async function postgresExact(sizes: number[]) {
  const opened = await openBenchStore("postgres");
  if (typeof opened === "string") return console.log(`\nSkipping PostgreSQL: ${opened}`);
  const rows: string[][] = [];
  try {
    const dims = 768;
    const draw = mixture({ dims, centres: CENTRES, spread: SPREAD, seed: 7 });
    const queries = Array.from({ length: 5 }, draw);
    let filled = 0;
    for (const size of sizes) {
      await fill(opened.store, "big", size - filled, draw);
      filled = size;
      await opened.settle?.();
      try {
        await timeSearches(opened.store, "big", queries.slice(0, 1)); // warm-up
        const r = await timeSearches(opened.store, "big", queries);
        rows.push([
          size.toLocaleString("en"),
          formatMicros(r.p50),
          formatMicros(r.p90),
          `${(r.p50 / size).toFixed(0)} µs`,
        ]);
      } catch (error) {
        // Past the store's query timeout is a result too.
        rows.push([
          size.toLocaleString("en"),
          `failed: ${(error as { code?: string }).code ?? (error as Error).message}`,
          "–",
          "–",
        ]);
      }
      console.error(`  postgres ${rows.at(-1)!.join(" | ")}`);
    }
  } finally {
    await opened.remove();
  }
  console.log(`\nPostgreSQL exact scan, ${768} dimensions, one owner, limit ${K} (wall time, 5 queries):\n`);
  printTable(["owner's vectors", "p50", "p90", "p50 per vector"], rows);
}

/** Sessions filled at once by `--store postgres` (`BENCH_VECTORS_FILL_CONCURRENCY`, default 1). */
const FILL_CONCURRENCY = Number(process.env.BENCH_VECTORS_FILL_CONCURRENCY ?? 1);
/** Exact scans timed by `--store postgres` (`BENCH_VECTORS_PG_EXACT`, default 3; 0 skips them). */
const PG_EXACT_QUERIES = Number(process.env.BENCH_VECTORS_PG_EXACT ?? 3);
/** Whether a kept schema's index is dropped and built again (`BENCH_VECTORS_PG_REBUILD=0` searches the kept one). */
const REBUILD = process.env.BENCH_VECTORS_PG_REBUILD !== "0";

/** {@link fill} with `concurrency` sessions written at a time (the store's pool takes them). */
async function fillConcurrently(
  store: VectorStore,
  owner: string,
  count: number,
  draw: () => Float32Array,
  truths: Truth[],
  concurrency: number,
) {
  const chunk = Math.ceil(count / Math.max(1, concurrency) / 100) * 100;
  const parts: Promise<void>[] = [];
  for (let done = 0; done < count; done += chunk)
    parts.push(fill(store, owner, Math.min(chunk, count - done), draw, truths));
  await Promise.all(parts);
}

/**
 * The exact answers (and scores) a kept schema's fill saved: at `size` if there, else at the largest
 * smaller size (to top up), if it holds at least `queries` of them; the owner must then hold exactly
 * that many vectors (a fill that stopped half-way saved nothing and cannot be reused).
 */
async function savedFill(
  admin: import("postgres").Sql,
  size: number,
  queries: number,
): Promise<{ size: number; keys: string[][]; scores: number[][]; fillSeconds: number } | undefined> {
  const [table] = await admin`SELECT 1 FROM pg_tables WHERE schemaname = current_schema() AND tablename = 'bench_fill'`;
  if (!table) return undefined;
  const [row] = await admin<{ size: number; keys: string[][]; scores: number[][]; fill_seconds: number }[]>`
    SELECT size, keys, scores, fill_seconds FROM bench_fill WHERE size <= ${size} ORDER BY size DESC LIMIT 1`;
  if (!row) return undefined;
  // Saved as JSON text in a jsonb (a string to the driver): parsed here.
  const parse = <T>(x: T | string): T => (typeof x === "string" ? (JSON.parse(x) as T) : x);
  const keys = parse(row.keys);
  const scores = parse(row.scores);
  if (keys.length < queries) return undefined;
  const [{ n }] = await admin<{ n: number }[]>`SELECT count(*)::int AS n FROM message_vectors`;
  if (n !== row.size) throw new Error(`the kept schema holds ${n} vectors, its last saved fill ${row.size}: drop it`);
  return { size: row.size, keys, scores, fillSeconds: row.fill_seconds };
}

/**
 * `--store postgres`: PostgreSQL's IVF index (postgres/_ivf.ts, schema version 20) against the truth
 * computed while filling, at `BENCH_VECTORS_SIZE` × 768 in one owner: the background build's wall time
 * (from the first search to the training being ready), then p50/p90 and recall@10 for each number of
 * probed cells, and the exact scan for comparison (it fails past its bound, the store's query timeout).
 */
async function postgresIndexed() {
  const { createPostgresStore } = await import("../src/stores/postgres/index.js");
  const { default: postgres } = await import("postgres");
  const { TEST_POSTGRES_URL } = await import("../test/_services.js");
  const { randomBytes } = await import("node:crypto");
  const kept = process.env.BENCH_VECTORS_PG_SCHEMA;
  const schema = kept ?? `tk_bench_ivf_${randomBytes(4).toString("hex")}`;
  const admin = postgres(TEST_POSTGRES_URL, { max: 1, onnotice: () => {}, connection: { search_path: schema } });
  const open = (vectorIndex: object | false) =>
    createPostgresStore({ url: TEST_POSTGRES_URL, schema, vectorIndex, queryTimeoutMs: 30_000 });
  const dims = 768;
  const rows: string[][] = [];
  try {
    const draw = mixture({ dims, centres: CENTRES, spread: SPREAD, seed: 7 });
    const queries = Array.from({ length: QUERIES }, draw);
    let truths = queries.map((q) => new Truth(q));
    // A kept schema filled by an earlier run is reused: at this size as it is (its index dropped first,
    // unless BENCH_VECTORS_PG_REBUILD=0), or at a smaller size topped up to this one.
    const saved = kept ? await savedFill(admin, SIZE, QUERIES) : undefined;
    let fillSeconds = saved?.fillSeconds ?? 0;
    let start = performance.now();
    if (saved) {
      truths = queries.map((q, i) => Object.assign(new Truth(q), { keys: saved.keys[i], scores: saved.scores[i] }));
      if (REBUILD || saved.size < SIZE) await admin`TRUNCATE vector_codes, vector_ivf`;
      console.error(
        `  postgres: reusing ${schema}, ${saved.size.toLocaleString("en")} × ${dims} (filled in ${fillSeconds.toFixed(0)} s)`,
      );
    }
    if (!saved || saved.size < SIZE) {
      const filler = open(false);
      const from = saved?.size ?? 0;
      // A top-up draws other vectors around the same centres (the queries' draw would repeat the first fill's).
      const more =
        from === 0 ? draw : mixture({ dims, centres: CENTRES, spread: SPREAD, seed: 7, noiseSeed: 7_000 + from });
      await fillConcurrently(filler, "big", SIZE - from, more, truths, FILL_CONCURRENCY);
      fillSeconds += (performance.now() - start) / 1000;
      await filler.close();
      if (kept) {
        await admin`CREATE TABLE IF NOT EXISTS bench_fill (size integer PRIMARY KEY, fill_seconds float8, keys jsonb, scores jsonb)`;
        await admin`INSERT INTO bench_fill VALUES (${SIZE}, ${fillSeconds}, ${JSON.stringify(truths.map((t) => t.keys))}::jsonb, ${JSON.stringify(truths.map((t) => t.scores))}::jsonb)`;
      }
      console.error(
        `  postgres: ${SIZE.toLocaleString("en")} × ${dims} filled in ${fillSeconds.toFixed(0)} s (from ${from.toLocaleString("en")})`,
      );
      if (process.env.BENCH_VECTORS_PG_FILL_ONLY === "1") return;
    }
    const exact = open(false);
    try {
      if (PG_EXACT_QUERIES === 0) throw new Error("not measured (BENCH_VECTORS_PG_EXACT=0)");
      const e = await timeSearches(exact, "big", queries.slice(0, PG_EXACT_QUERIES));
      rows.push([
        "exact scan",
        "–",
        formatMicros(e.p50),
        formatMicros(e.p90),
        formatMicros(e.cpu50),
        recall(e.results, truths).toFixed(3),
      ]);
    } catch (error) {
      rows.push([
        "exact scan",
        "–",
        `failed: ${(error as { code?: string }).code ?? (error as Error).message}`,
        "–",
        "–",
        "–",
      ]);
    }
    await exact.close();
    let buildSeconds = 0;
    let buildCpu = { user: 0, system: 0 };
    const ready = async () => (await admin`SELECT 1 FROM vector_ivf WHERE ready`).length > 0;
    if (REBUILD || !(await ready())) {
      const indexed = open({});
      start = performance.now();
      const used = process.cpuUsage();
      // The first search sizes the owner and queues the build (answered by the exact scan, which may time out).
      await indexed.searchVectors({ userId: "big", model: MODEL, vector: queries[0], limit: K }).catch(() => {});
      while (!(await ready())) await new Promise((r) => setTimeout(r, 200));
      buildSeconds = (performance.now() - start) / 1000;
      buildCpu = process.cpuUsage(used);
      await indexed.close();
      console.error(
        `  postgres build ${buildSeconds.toFixed(1)} s (process CPU ${((buildCpu.user + buildCpu.system) / 1e6).toFixed(1)} s)`,
      );
    } else console.error("  postgres: the kept index is searched (BENCH_VECTORS_PG_REBUILD=0): build not measured");
    for (const probes of PROBES) {
      const store = open({ probes });
      await timeSearches(store, "big", queries.slice(0, 3));
      const r = await timeSearches(store, "big", queries);
      rows.push([
        "IVF + re-score",
        `${probes}`,
        formatMicros(r.p50),
        formatMicros(r.p90),
        formatMicros(r.cpu50),
        recall(r.results, truths).toFixed(3),
      ]);
      console.error(`  postgres ${rows.at(-1)!.join(" | ")}`);
      await store.close();
    }
    const [{ bytes }] = await admin<{ bytes: string }[]>`SELECT pg_total_relation_size('vector_codes')::text AS bytes`;
    console.log(`
PostgreSQL, ${dims} dimensions, ${SIZE.toLocaleString("en")} vectors in one owner (${CENTRES} centres, spread ${SPREAD}), ${QUERIES} queries, limit ${K}, candidates 64, at least 3,000 vectors probed:
`);
    printTable(["path", "probes", "p50", "p90", "process CPU p50", `recall@${K}`], rows);
    console.log(`
fill ${fillSeconds.toFixed(0)} s; background build (first search to ready) ${buildSeconds.toFixed(1)} s, process CPU ${((buildCpu.user + buildCpu.system) / 1e6).toFixed(1)} s; vector_codes ${mib(Number(bytes))}`);
  } finally {
    if (!kept) await admin.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await admin.end();
  }
}

console.log(
  `${cpus()[0]?.model ?? "?"}, ${cpus().length} cores, load average ${loadavg()[0].toFixed(1)} at the start; ${new Date().toISOString()}`,
);
const PG_SIZES =
  process.env.BENCH_VECTORS_POSTGRES?.split(",")
    .map(Number)
    .filter((n) => n > 0) ?? [];
const STORE = process.argv.includes("--store") ? process.argv[process.argv.indexOf("--store") + 1] : undefined;
if (STORE === "postgres") await postgresIndexed();
else {
  if (PG_SIZES.length > 0) await postgresExact(PG_SIZES);
  if (process.env.BENCH_VECTORS_SQLITE !== "0") for (const dims of DIMS) await run(dims);
}
