/**
 * `npm run bench -- vectors`: semantic search of one owner holding many messages, on SQLite: the
 * exact scan against the binary index re-scored exactly (`vectorIndex`, sqlite/_vector-index.ts), in
 * one run: p50/p90 latency, recall@10 against the exact answer, the index's build time and size, and
 * the process's memory; then the owner size at which the index starts to pay (the default
 * `minOwnerVectors`), and how recall and latency move with `candidates`.
 *
 * Vectors are drawn from a Gaussian mixture (`BENCH_VECTORS_CENTRES` centres, 256 by default, each a
 * random direction; a message is its centre plus isotropic noise of norm `BENCH_VECTORS_SPREAD` (1.0:
 * a message's cosine to its centre is about 0.7), normalised), queries from the same mixture. The exact
 * top 10 of every query is computed while the store is filled, and checked against the store's own
 * exact scan for the queries timed on it.
 *
 * PostgreSQL's exact scan, its only path, at the sizes of `BENCH_VECTORS_POSTGRES` (e.g. `20000,50000`;
 * off by default); `BENCH_VECTORS_SQLITE=0` skips SQLite.
 *
 * `BENCH_VECTORS_SIZE` (default 100,000; the 1M figures in docs/benchmarks.md use 1000000),
 * `BENCH_VECTORS_DIMS` (default `768,1536`), `BENCH_VECTORS_QUERIES` (default 50), `BENCH_QUICK=1`
 * (20,000 vectors, 768 dimensions). Sessions hold 100 messages each, all of one owner.
 */
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { newSessionId } from "../src/core/ids.js";
import type { VectorStore } from "../src/core/types.js";
import { createSqliteStore, type SqliteVectorIndexOptions } from "../src/stores/sqlite/index.js";
import { openBenchStore } from "./_recall-stores.js";
import { collectGarbage, formatMicros, percentile, printTable, QUICK, seededRandom } from "./_harness.js";

const SIZE = Number(process.env.BENCH_VECTORS_SIZE ?? (QUICK ? 20_000 : 100_000));
const DIMS = (process.env.BENCH_VECTORS_DIMS ?? (QUICK ? "768" : "768,1536")).split(",").map(Number);
const QUERIES = Number(process.env.BENCH_VECTORS_QUERIES ?? (QUICK ? 20 : 50));
const CENTRES = Number(process.env.BENCH_VECTORS_CENTRES ?? 256);
const SPREAD = Number(process.env.BENCH_VECTORS_SPREAD ?? 1);
/** Exact scans timed at the full size (each reads every vector: seconds at 1M). */
const EXACT_QUERIES = Number(process.env.BENCH_VECTORS_EXACT_QUERIES ?? (SIZE >= 500_000 ? 3 : 20));
const SMALL_OWNERS = [1_000, 2_000, 5_000, 10_000, 20_000].filter((n) => n < SIZE);
const CANDIDATES = [250, 500, 1000, 2000, 4000];
const PER_SESSION = 100;
const MODEL = "bench-embedding";
const K = 10;

/** Draws normalised vectors from the mixture. */
function mixture(dims: number, seed: number) {
  const random = seededRandom(seed);
  let spare: number | undefined;
  const gauss = () => {
    if (spare !== undefined) {
      const s = spare;
      spare = undefined;
      return s;
    }
    const u = 1 - random();
    const v = random();
    const r = Math.sqrt(-2 * Math.log(u));
    spare = r * Math.sin(2 * Math.PI * v);
    return r * Math.cos(2 * Math.PI * v);
  };
  const unit = (v: Float32Array) => {
    let n = 0;
    for (let i = 0; i < v.length; i++) n += v[i] * v[i];
    const s = 1 / Math.sqrt(n);
    for (let i = 0; i < v.length; i++) v[i] *= s;
    return v;
  };
  const centres = Array.from({ length: CENTRES }, () => unit(Float32Array.from({ length: dims }, gauss)));
  const noise = SPREAD / Math.sqrt(dims);
  return () => {
    const c = centres[Math.floor(random() * centres.length)];
    const v = new Float32Array(dims);
    for (let i = 0; i < dims; i++) v[i] = c[i] + noise * gauss();
    return unit(v);
  };
}

/** The running exact top K of one query (the store scores float32 vectors by a double dot product). */
class Truth {
  readonly keys: string[] = [];
  readonly scores: number[] = [];
  constructor(readonly query: Float32Array) {}
  offer(key: string, v: Float32Array) {
    let s = 0;
    for (let i = 0; i < v.length; i++) s += v[i] * this.query[i];
    if (this.scores.length === K && s <= this.scores[K - 1]) return;
    let at = this.scores.length;
    while (at > 0 && this.scores[at - 1] < s) at--;
    this.scores.splice(at, 0, s);
    this.keys.splice(at, 0, key);
    if (this.scores.length > K) {
      this.scores.pop();
      this.keys.pop();
    }
  }
}

const mib = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(0)} MiB`;
const rss = () => process.memoryUsage().rss;

/** Fills one owner's sessions with `count` messages and their vectors; offers each to `truths`. */
async function fill(store: VectorStore, owner: string, count: number, draw: () => Float32Array, truths: Truth[] = []) {
  for (let done = 0; done < count; done += PER_SESSION) {
    const n = Math.min(PER_SESSION, count - done);
    const session = await store.createSession({ id: newSessionId(), userId: owner });
    const added = await store.appendMessages(
      session.id,
      Array.from({ length: n }, (_, i) => ({ role: "user" as const, content: `message ${done + i}` })),
    );
    const vectors = added.map(() => draw());
    await store.putEmbeddings(session.id, MODEL, added.map((m, i) => ({ seq: m.seq, createdAt: m.createdAt, vector: vectors[i] })));
    for (const t of truths) for (let i = 0; i < n; i++) t.offer(`${session.id}:${added[i].seq}`, vectors[i]);
    if ((done + n) % 100_000 === 0) console.error(`    ${(done + n).toLocaleString("en")} vectors`);
  }
}

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
  return { p50: percentile(samples, 50) * 1000, p90: percentile(samples, 90) * 1000, cpu50: percentile(cpu, 50) * 1000, results };
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

/** Bytes of the index's tables (sqlite's dbstat). */
function indexBytes(path: string): number {
  const db = new Database(path, { readonly: true });
  try {
    return (db.prepare("SELECT coalesce(sum(pgsize), 0) AS b FROM dbstat WHERE name LIKE 'vector_index%'").get() as { b: number }).b;
  } finally {
    db.close();
  }
}

async function run(dims: number) {
  const dir = mkdtempSync(join(tmpdir(), "tk-bench-vectors-"));
  const path = join(dir, "vectors.db");
  const open = (vectorIndex: SqliteVectorIndexOptions | false) => createSqliteStore({ path, vectorIndex, backgroundCheckpoints: false });
  const exact = open(false);
  try {
    const draw = mixture(dims, 1000 + dims);
    const queries = Array.from({ length: QUERIES }, draw);
    const truths = queries.map((q) => new Truth(q));
    let start = performance.now();
    await fill(exact, "big", SIZE, draw, truths);
    const fillSeconds = (performance.now() - start) / 1000;
    for (const n of SMALL_OWNERS) await fill(exact, `small-${n}`, n, draw);
    console.error(`  ${dims} dims: filled ${SIZE.toLocaleString("en")} vectors in ${fillSeconds.toFixed(0)} s; rss ${mib(rss())}`);
    collectGarbage();

    const exactRun = await timeSearches(exact, "big", queries.slice(0, EXACT_QUERIES));
    const agree = recall(exactRun.results, truths);
    console.error(`  exact: p50 ${formatMicros(exactRun.p50)} (CPU ${formatMicros(exactRun.cpu50)}); agrees with the computed top ${K}: ${agree.toFixed(3)}; rss ${mib(rss())}`);

    // The first search by the indexed store scans exactly and then indexes the owner.
    const indexed = open({ minOwnerVectors: 1 });
    start = performance.now();
    await indexed.searchVectors({ userId: "big", model: MODEL, vector: queries[0], limit: K });
    const buildSeconds = (performance.now() - start) / 1000;
    await indexed.close();
    const rssBuilt = rss();
    console.error(`  first search (exact scan + index build): ${buildSeconds.toFixed(1)} s; rss ${mib(rssBuilt)}`);

    const rows: string[][] = [];
    rows.push([`${dims}`, "exact scan", "–", formatMicros(exactRun.p50), formatMicros(exactRun.p90), formatMicros(exactRun.cpu50), agree.toFixed(3)]);
    for (const candidates of CANDIDATES) {
      const store = open({ minOwnerVectors: Number.MAX_SAFE_INTEGER, candidates });
      await timeSearches(store, "big", queries.slice(0, 3)); // warm-up
      const r = await timeSearches(store, "big", queries);
      rows.push([`${dims}`, "binary index + re-score", `${candidates}`, formatMicros(r.p50), formatMicros(r.p90), formatMicros(r.cpu50), recall(r.results, truths).toFixed(3)]);
      console.error(`  ${rows.at(-1)!.join(" | ")}`);
      await store.close();
    }
    const maxRss = process.resourceUsage().maxRSS * 1024;
    console.log(
      `\n${dims} dimensions, ${SIZE.toLocaleString("en")} vectors in one owner (${CENTRES} centres, spread ${SPREAD}), ` +
        `${QUERIES} queries (exact: ${EXACT_QUERIES}), limit ${K}:\n`,
    );
    printTable(["dims", "path", "candidates", "p50", "p90", "CPU p50", `recall@${K}`], rows);
    console.log(
      `\nfill ${fillSeconds.toFixed(0)} s; first indexed search (exact scan + build) ${buildSeconds.toFixed(1)} s; ` +
        `database ${mib(statSync(path).size)}, of which the index ${mib(indexBytes(path))}; ` +
        `process RSS after build ${mib(rssBuilt)}, peak ${mib(maxRss)}`,
    );

    // Where the index starts to pay: exact against indexed at small owner sizes (same database).
    const small: string[][] = [];
    const indexedSmall = open({ minOwnerVectors: 1 });
    for (const n of SMALL_OWNERS) {
      const owner = `small-${n}`;
      await indexedSmall.searchVectors({ userId: owner, model: MODEL, vector: queries[0], limit: K }); // builds
      const e = await timeSearches(exact, owner, queries.slice(0, 20));
      const x = await timeSearches(indexedSmall, owner, queries.slice(0, 20));
      small.push([`${n.toLocaleString("en")}`, formatMicros(e.p50), formatMicros(e.cpu50), formatMicros(x.p50), formatMicros(x.cpu50)]);
    }
    await indexedSmall.close();
    if (small.length > 0) {
      console.log(`\nOwner size where the index pays (${dims} dims, candidates default, p50 of 20):\n`);
      printTable(["owner's vectors", "exact p50", "exact CPU p50", "index p50", "index CPU p50"], small);
    }
  } finally {
    await exact.close();
    rmSync(dir, { recursive: true, force: true });
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
    const draw = mixture(dims, 7);
    const queries = Array.from({ length: 5 }, draw);
    let filled = 0;
    for (const size of sizes) {
      await fill(opened.store, "big", size - filled, draw);
      filled = size;
      await opened.settle?.();
      try {
        await timeSearches(opened.store, "big", queries.slice(0, 1)); // warm-up
        const r = await timeSearches(opened.store, "big", queries);
        rows.push([size.toLocaleString("en"), formatMicros(r.p50), formatMicros(r.p90), `${(r.p50 / size).toFixed(0)} µs`]);
      } catch (error) {
        // Past the store's query timeout is a result too.
        rows.push([size.toLocaleString("en"), `failed: ${(error as { code?: string }).code ?? (error as Error).message}`, "–", "–"]);
      }
      console.error(`  postgres ${rows.at(-1)!.join(" | ")}`);
    }
  } finally {
    await opened.remove();
  }
  console.log(`\nPostgreSQL exact scan, ${768} dimensions, one owner, limit ${K} (wall time, 5 queries):\n`);
  printTable(["owner's vectors", "p50", "p90", "p50 per vector"], rows);
}

console.log(`${cpus()[0]?.model ?? "?"}, ${cpus().length} cores, load average ${loadavg()[0].toFixed(1)} at the start; ${new Date().toISOString()}`);
const PG_SIZES = process.env.BENCH_VECTORS_POSTGRES?.split(",").map(Number).filter((n) => n > 0) ?? [];
if (PG_SIZES.length > 0) await postgresExact(PG_SIZES);
if (process.env.BENCH_VECTORS_SQLITE !== "0") for (const dims of DIMS) await run(dims);
