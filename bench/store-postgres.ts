/**
 * PostgreSQL store benchmark, two questions:
 *
 * 1. p50/p99 of "load last 20" and "append 1" through the store, next to a raw-driver baseline measured
 *    in the same interleaved rounds (bench/_store-bench.ts) on the store's own table (`SELECT body
 *    FROM messages WHERE session_id = $1 ORDER BY seq DESC LIMIT 20`, one prepared statement, no JSON
 *    parsing; the append is a plain INSERT).
 * 2. How to assign contiguous `seq` under many concurrent writers on one session: the session row lock,
 *    an advisory lock (with `max(seq)`), or what the store does, an advisory lock as a FIFO queue in
 *    front of the row lock; inside one server-side call and as client-driven transactions (one round
 *    trip per statement while the lock is held); with durable commits and with
 *    `synchronous_commit = off`, which leaves the cost of the locks themselves.
 *
 * `BENCH_QUICK=1` shrinks the data. `THREADKEEP_BENCH_POSTGRES_URL` (else `THREADKEEP_TEST_POSTGRES_URL`,
 * else the local service) names the server; an unreachable server skips with a printed reason.
 * Everything lives in schemas named `tk_bench_<random>_*`, dropped afterwards.
 */
import { randomBytes, randomUUID } from "node:crypto";
import postgres from "postgres";
import { createPostgresStore } from "../src/stores/postgres/index.js";
import { collectGarbage, formatMicros, percentile, printTable, QUICK } from "./_harness.js";
import {
  loadStore,
  MAX_MESSAGES,
  measureSubjects,
  printNetworkStoreReport,
  SCALES,
  type Scale,
  type StoreResult,
  type Subject,
  storeSubject,
} from "./_store-bench.js";
import { messageOf, sessionIdOf } from "./_store-data.js";

const URL_ =
  process.env.THREADKEEP_BENCH_POSTGRES_URL ??
  process.env.THREADKEEP_TEST_POSTGRES_URL ??
  "postgres://postgres@127.0.0.1:5432/test";
/** Sessions loaded at once; loading is not measured, it only decides how long a run takes. */
const LOAD_CONCURRENCY = 16;
/** The store's default pool size. */
const STORE_POOL = 10;
const WRITERS = 50;
const WRITER_POOL = 25;
const CONTENDED_APPENDS = QUICK ? 300 : 1_000;
const LOCK_ROUNDS = 3;
const prefix = `tk_bench_${randomBytes(4).toString("hex")}`;
const STORE = "postgres";
const RAW = "raw postgres.js (SELECT … LIMIT 20; plain INSERT)";

type Sql = postgres.Sql;

/** A raw client that sees the store's tables of `schema` unqualified, as the store does. */
const rawClient = (schema: string, max: number): Sql =>
  postgres(URL_, { max, onnotice: () => {}, connection: { search_path: schema } });

async function inParallel(count: number, concurrency: number, fn: (i: number) => Promise<unknown>) {
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < count; i = next++) await fn(i);
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
}

/** Loads the store at `scale` and measures it against the raw driver on the store's own table. */
async function benchScale(scale: Scale): Promise<StoreResult[]> {
  const schema = `${prefix}_${scale.label.toLowerCase()}`;
  const store = createPostgresStore({ url: URL_, schema, poolSize: STORE_POOL });
  // The baseline gets the store's pool size: the driver hands sequential queries round-robin to
  // every connection a pool has opened, which costs a little on a busy machine, so both pools are
  // opened fully (the store's by loading, the baseline's below) before anything is measured.
  const raw = rawClient(schema, STORE_POOL);
  try {
    // One append of a session's whole history: one INSERT of its rows.
    await loadStore(store, scale, STORE, LOAD_CONCURRENCY);
    await raw`VACUUM ANALYZE messages`;
    await raw`VACUUM ANALYZE sessions`;
    // The raw append goes to a plain table, so it cannot disturb the store's seq bookkeeping.
    await raw`CREATE TABLE raw_messages (session_id text, seq bigint, body text, PRIMARY KEY (session_id, seq))`;
    const nextSeq = new Map<string, number>();
    const baseline: Subject = {
      name: RAW,
      last20: (id) => raw`SELECT body FROM messages WHERE session_id = ${id} ORDER BY seq DESC LIMIT 20`,
      append1: (id, message) => {
        const seq = nextSeq.get(id) ?? 1;
        nextSeq.set(id, seq + 1);
        return raw`INSERT INTO raw_messages (session_id, seq, body) VALUES (${id}, ${seq}, ${JSON.stringify(message)})`;
      },
    };
    await inParallel(scale.sessions, STORE_POOL * 2, async (s) => baseline.last20(sessionIdOf(s)));
    return await measureSubjects(scale, [baseline, storeSubject(store, STORE)]);
  } finally {
    await store.close();
    await raw`DROP SCHEMA ${raw(schema)} CASCADE`;
    await raw.end();
    collectGarbage();
  }
}

/** Per-append latency and throughput of one contended run. */
interface Contended {
  name: string;
  p50: number;
  p99: number;
  perSecond: number;
}

/** Runs {@link CONTENDED_APPENDS} appends from {@link WRITERS} concurrent writers on one session. */
async function contend(name: string, append: (i: number) => Promise<unknown>): Promise<Contended> {
  const samples: number[] = [];
  const started = performance.now();
  await inParallel(CONTENDED_APPENDS, WRITERS, async (i) => {
    const t = performance.now();
    await append(i);
    samples.push((performance.now() - t) * 1000);
  });
  const seconds = (performance.now() - started) / 1000;
  samples.sort((a, b) => a - b);
  return {
    name,
    p50: percentile(samples, 50),
    p99: percentile(samples, 99),
    perSecond: CONTENDED_APPENDS / seconds,
  };
}

/** The store's append rewritten around an advisory lock: the alternative the store did not take. */
async function createAdvisoryAppend(sql: Sql): Promise<void> {
  await sql`
    CREATE FUNCTION bench_append_advisory(p_session text, p_bodies text[], p_texts text[], p_lang regconfig)
    RETURNS bigint LANGUAGE plpgsql VOLATILE AS $fn$
    DECLARE
      v_now bigint := threadkeep_now_ms();
      v_last bigint;
    BEGIN
      PERFORM pg_advisory_xact_lock(hashtextextended(p_session, 0));
      SELECT coalesce(max(seq), 0) INTO v_last FROM messages WHERE session_id = p_session;
      INSERT INTO messages (session_id, seq, created_at, body, search_text, tsv)
        SELECT p_session, v_last + u.ord, v_now, u.body, u.txt, to_tsvector(p_lang, u.txt)
        FROM unnest(p_bodies, p_texts) WITH ORDINALITY AS u(body, txt, ord);
      -- An append moves the session's last activity either way, so the row lock is taken here too.
      UPDATE sessions SET last_seq = v_last + cardinality(p_bodies), last_activity_at = v_now WHERE id = p_session;
      RETURN v_last + 1;
    END
    $fn$`;
}

/** The ways to assign seq, each appending message `i` to session `id` through `sql`. */
function lockVariants(sql: Sql): [string, (id: string, i: number) => Promise<unknown>][] {
  const body = (i: number) => JSON.stringify(messageOf(i, i));
  const text = (i: number) => String(messageOf(i, i).content).toLowerCase();
  return [
    [
      "advisory queue, then row lock, one call (the store's)",
      (id, i) =>
        sql`SELECT * FROM threadkeep_append_queued(${id}, ${[body(i)]}::text[], ${[text(i)]}::text[], ${MAX_MESSAGES * 100}, NULL, 'simple')`,
    ],
    [
      "row lock, one call",
      (id, i) =>
        sql`SELECT * FROM threadkeep_append(${id}, ${[body(i)]}::text[], ${[text(i)]}::text[], ${MAX_MESSAGES * 100}, NULL, 'simple')`,
    ],
    [
      "advisory lock and max(seq), one call",
      (id, i) => sql`SELECT bench_append_advisory(${id}, ${[body(i)]}::text[], ${[text(i)]}::text[], 'simple')`,
    ],
    [
      "row lock, client transaction",
      (id, i) =>
        sql.begin(async (tx) => {
          const [s] = await tx`
            UPDATE sessions SET last_seq = last_seq + 1, last_activity_at = threadkeep_now_ms()
            WHERE id = ${id} RETURNING last_seq, last_activity_at`;
          await tx`
            INSERT INTO messages (session_id, seq, created_at, body, search_text, tsv)
            VALUES (${id}, ${s.last_seq}, ${s.last_activity_at}, ${body(i)}, ${text(i)}, to_tsvector('simple', ${text(i)}))`;
        }),
    ],
    [
      "advisory lock and max(seq), client transaction",
      (id, i) =>
        sql.begin(async (tx) => {
          await tx`SELECT pg_advisory_xact_lock(hashtextextended(${id}, 0))`;
          const [m] = await tx`SELECT coalesce(max(seq), 0)::int AS last FROM messages WHERE session_id = ${id}`;
          await tx`
            INSERT INTO messages (session_id, seq, created_at, body, search_text, tsv)
            VALUES (${id}, ${m.last + 1}, threadkeep_now_ms(), ${body(i)}, ${text(i)}, to_tsvector('simple', ${text(i)}))`;
          await tx`UPDATE sessions SET last_seq = ${m.last + 1}, last_activity_at = threadkeep_now_ms() WHERE id = ${id}`;
        }),
    ],
  ];
}

/**
 * Contended appends to one session, per seq-lock variant, interleaved over {@link LOCK_ROUNDS} rounds
 * (the round with the median throughput is shown). Durable commits wait for the WAL flush while the
 * lock is held, so they mostly measure the disk; `synchronous_commit = off` leaves the lock's own cost.
 */
async function benchLocks(): Promise<void> {
  const schema = `${prefix}_locks`;
  const store = createPostgresStore({ url: URL_, schema, poolSize: WRITER_POOL });
  await store.getSession(sessionIdOf(0)); // Migrates the schema.
  const rows: string[][] = [];
  try {
    for (const durable of [true, false]) {
      const sql = postgres(URL_, {
        max: WRITER_POOL,
        onnotice: () => {},
        connection: { search_path: schema, synchronous_commit: durable ? "on" : "off" },
      });
      try {
        if (durable) await createAdvisoryAppend(sql);
        const variants = lockVariants(sql);
        const rounds = new Map<string, Contended[]>(variants.map(([name]) => [name, []]));
        for (let round = 0; round < LOCK_ROUNDS; round++) {
          for (const [name, append] of variants) {
            const { id } = await store.createSession({ id: randomUUID(), userId: "locks" });
            rounds.get(name)!.push(await contend(name, (i) => append(id, i)));
            const [r] = await sql`
              SELECT count(*)::int AS n, min(seq)::int AS lo, max(seq)::int AS hi FROM messages WHERE session_id = ${id}`;
            if (r.n !== CONTENDED_APPENDS || r.lo !== 1 || r.hi !== CONTENDED_APPENDS) {
              throw new Error(`${name}: seq not contiguous (${JSON.stringify(r)})`);
            }
          }
        }
        for (const [name, results] of rounds) {
          const median = [...results].sort((a, b) => a.perSecond - b.perSecond)[Math.floor(results.length / 2)];
          rows.push([
            name,
            durable ? "on" : "off",
            formatMicros(median.p50),
            formatMicros(median.p99),
            Math.round(median.perSecond).toLocaleString("en"),
          ]);
        }
      } finally {
        await sql.end();
      }
    }
  } finally {
    await store.close();
    const sql = rawClient(schema, 1);
    await sql`DROP SCHEMA ${sql(schema)} CASCADE`;
    await sql.end();
  }
  console.log(
    `\n## PostgreSQL seq assignment under contention (${CONTENDED_APPENDS.toLocaleString("en")} appends of 1 message to one session, ${WRITERS} concurrent writers over ${WRITER_POOL} connections, median of ${LOCK_ROUNDS} rounds)\n`,
  );
  printTable(["seq lock", "synchronous_commit", "append p50", "append p99", "appends/s"], rows);
}

async function main(): Promise<void> {
  const probe = postgres(URL_, { max: 1, connect_timeout: 2, onnotice: () => {} });
  try {
    const [{ version }] = await probe`SELECT version()`;
    console.log(`server: ${version}`);
  } catch (error) {
    console.log(`postgres benchmark skipped: ${URL_} is not reachable (${(error as Error).message})`);
    return;
  } finally {
    await probe.end();
  }
  const results: StoreResult[] = [];
  for (const scale of SCALES) {
    console.log(
      `# ${scale.label} messages: ${scale.sessions.toLocaleString("en")} sessions × ${scale.messagesPerSession}`,
    );
    results.push(...(await benchScale(scale)));
  }
  printNetworkStoreReport("PostgreSQL store", results, STORE, RAW);
  await benchLocks();
}

await main();
