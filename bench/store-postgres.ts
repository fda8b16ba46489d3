/**
 * PostgreSQL store benchmark, two questions:
 *
 * 1. p50/p99 of "load last 20" and "append 1" through the store, next to a raw-driver baseline measured
 *    in the same run on the store's own table (`SELECT body FROM messages WHERE session_id = $1
 *    ORDER BY seq DESC LIMIT 20`, one prepared statement, no JSON parsing).
 * 2. How to assign contiguous `seq` under many concurrent writers on one session: the session row lock
 *    the store takes, or an advisory lock; each inside one server-side call and as a client-driven
 *    transaction (one round trip per statement while the lock is held); with durable commits and
 *    with `synchronous_commit = off`, which leaves the cost of the lock itself.
 *
 * `BENCH_QUICK=1` shrinks the data. `THREADKEEP_BENCH_POSTGRES_URL` (else `THREADKEEP_TEST_POSTGRES_URL`,
 * else the local service) names the server; an unreachable server skips with a printed reason.
 * Everything lives in schemas named `tk_bench_<random>_*`, dropped afterwards.
 */
import { randomBytes, randomUUID } from "node:crypto";
import postgres from "postgres";
import { createPostgresStore } from "../src/stores/postgres.js";
import {
  collectGarbage,
  elapsedMs,
  formatMicros,
  formatRatio,
  type Measurement,
  measure,
  percentile,
  printTable,
  QUICK,
  seededRandom,
} from "./_harness.js";
import { messageOf, sessionIdOf } from "./_store-data.js";

interface Scale {
  label: string;
  sessions: number;
  messagesPerSession: number;
}

const URL_ =
  process.env.THREADKEEP_BENCH_POSTGRES_URL ??
  process.env.THREADKEEP_TEST_POSTGRES_URL ??
  "postgres://postgres@127.0.0.1:5432/test";
const SCALES: Scale[] = QUICK
  ? [
      { label: "5K", sessions: 250, messagesPerSession: 20 },
      { label: "100K", sessions: 1_000, messagesPerSession: 100 },
    ]
  : [
      { label: "40K", sessions: 2_000, messagesPerSession: 20 },
      { label: "1M", sessions: 10_000, messagesPerSession: 100 },
    ];
const READS = QUICK ? 2_000 : 10_000;
const APPENDS = QUICK ? 500 : 2_000;
/** Sessions loaded at once; loading is not measured, it only decides how long a run takes. */
const LOAD_CONCURRENCY = 16;
/** What `Memory` passes on every commit by default. */
const MAX_MESSAGES = 200;
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

/**
 * "load last 20" of the baseline and the store, interleaved call by call on the same random sessions
 * (which goes first alternates), so both meet the same load: this machine is shared, and passes one
 * after the other would bill a busy minute to whichever ran in it.
 */
async function interleavedReads(
  scale: Scale,
  raw: (id: string) => Promise<unknown>,
  store: (id: string) => Promise<unknown>,
): Promise<[Measurement, Measurement]> {
  const ids = Array.from({ length: scale.sessions }, (_, s) => sessionIdOf(s));
  const random = seededRandom(1);
  const samples = [new Float64Array(READS), new Float64Array(READS)];
  const fns = [raw, store];
  const warmup = Math.max(20, Math.floor(READS / 10));
  for (let i = -warmup; i < READS; i++) {
    const id = ids[Math.floor(random() * ids.length)];
    for (const k of i % 2 === 0 ? [0, 1] : [1, 0]) {
      const start = performance.now();
      await fns[k](id);
      if (i >= 0) samples[k][i] = (performance.now() - start) * 1000;
    }
  }
  const summary = (name: string, xs: Float64Array): Measurement => {
    const sorted = Array.from(xs).sort((a, b) => a - b);
    const mean = sorted.reduce((sum, x) => sum + x, 0) / sorted.length;
    return { name, iterations: READS, p50: percentile(sorted, 50), p99: percentile(sorted, 99), mean };
  };
  return [summary("load last 20", samples[0]), summary("load last 20", samples[1])];
}

/** "append 1" at random sessions, in the same order for every subject. */
function appends(scale: Scale, append: (id: string, i: number) => Promise<unknown>): Promise<Measurement> {
  const ids = Array.from({ length: scale.sessions }, (_, s) => sessionIdOf(s));
  const random = seededRandom(2);
  return measure("append 1", (i) => append(ids[Math.floor(random() * ids.length)], i), APPENDS);
}

interface Row {
  subject: string;
  scale: Scale;
  last20: Measurement;
  append1: Measurement;
}

async function benchScale(scale: Scale): Promise<Row[]> {
  const schema = `${prefix}_${scale.label.toLowerCase()}`;
  const store = createPostgresStore({ url: URL_, schema, poolSize: STORE_POOL });
  // The baseline gets the store's default pool: the driver hands sequential queries round-robin to
  // every connection a pool has opened, which costs a little on a busy machine, so both pools are
  // opened fully (the store's by loading, the baseline's below) before anything is measured.
  const raw = rawClient(schema, STORE_POOL);
  try {
    const started = performance.now();
    // One append of the whole history per session: one INSERT of all its rows.
    await inParallel(scale.sessions, LOAD_CONCURRENCY, async (s) => {
      const id = sessionIdOf(s);
      await store.createSession({ id, userId: `user-${s % 500}` });
      await store.appendMessages(
        id,
        Array.from({ length: scale.messagesPerSession }, (_, m) => messageOf(s, m)),
      );
    });
    await raw`VACUUM ANALYZE messages`;
    await raw`VACUUM ANALYZE sessions`;
    console.log(
      `  loaded ${(scale.sessions * scale.messagesPerSession).toLocaleString("en")} messages in ${elapsedMs(started)}`,
    );
    const last20 = (id: string) =>
      raw`SELECT body FROM messages WHERE session_id = ${id} ORDER BY seq DESC LIMIT 20`;
    await inParallel(scale.sessions, STORE_POOL * 2, (s) => last20(sessionIdOf(s)));
    const [rawRead, read] = await interleavedReads(scale, last20, (id) =>
      store.getMessages(id, { last: 20 }),
    );
    // The raw append goes to a plain table, so it cannot disturb the store's seq bookkeeping.
    await raw`CREATE TABLE raw_messages (session_id text, seq bigint, body text, PRIMARY KEY (session_id, seq))`;
    const nextSeq = new Map<string, number>();
    const rawAppend = await appends(scale, (id, i) => {
      const seq = nextSeq.get(id) ?? 1;
      nextSeq.set(id, seq + 1);
      return raw`
        INSERT INTO raw_messages (session_id, seq, body)
        VALUES (${id}, ${seq}, ${JSON.stringify(messageOf(i, 1_000_000 + i))})`;
    });
    const append = await appends(scale, (id, i) =>
      store.appendMessages(id, [messageOf(i, 1_000_000 + i)], { maxMessages: MAX_MESSAGES }),
    );
    return [
      { subject: RAW, scale, last20: rawRead, append1: rawAppend },
      { subject: STORE, scale, last20: read, append1: append },
    ];
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

/** The four ways to assign seq, each appending message `i` to session `id` through `sql`. */
function lockVariants(sql: Sql): [string, (id: string, i: number) => Promise<unknown>][] {
  const body = (i: number) => JSON.stringify(messageOf(i, i));
  const text = (i: number) => String(messageOf(i, i).content).toLowerCase();
  return [
    [
      "row lock, one call (the store's threadkeep_append)",
      (id, i) =>
        sql`SELECT * FROM threadkeep_append(${id}, ${[body(i)]}::text[], ${[text(i)]}::text[], ${MAX_MESSAGES * 100}, NULL, 'simple')`,
    ],
    [
      "advisory lock, one call",
      (id, i) =>
        sql`SELECT bench_append_advisory(${id}, ${[body(i)]}::text[], ${[text(i)]}::text[], 'simple')`,
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
      "advisory lock, client transaction",
      (id, i) =>
        sql.begin(async (tx) => {
          await tx`SELECT pg_advisory_xact_lock(hashtextextended(${id}, 0))`;
          const [m] =
            await tx`SELECT coalesce(max(seq), 0)::int AS last FROM messages WHERE session_id = ${id}`;
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
          const median = [...results].sort((a, b) => a.perSecond - b.perSecond)[
            Math.floor(results.length / 2)
          ];
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

function report(rows: Row[]): void {
  const rawOf = (scale: Scale) => rows.find((r) => r.subject === RAW && r.scale === scale)!;
  console.log(
    `\n## PostgreSQL store (${READS.toLocaleString("en")} reads, ${APPENDS.toLocaleString("en")} appends each, random sessions)\n`,
  );
  printTable(
    [
      "subject",
      "messages",
      "last 20 p50",
      "last 20 p99",
      "append 1 p50",
      "append 1 p99",
      "last 20 p50 / raw",
    ],
    rows.map((r) => [
      r.subject,
      r.scale.label,
      formatMicros(r.last20.p50),
      formatMicros(r.last20.p99),
      formatMicros(r.append1.p50),
      formatMicros(r.append1.p99),
      formatRatio(r.last20.p50 / rawOf(r.scale).last20.p50),
    ]),
  );
  console.log();
  for (const r of rows.filter((x) => x.subject === STORE)) {
    const ratio = r.last20.p50 / rawOf(r.scale).last20.p50;
    console.log(
      `postgres "load last 20" at ${r.scale.label}: ${formatRatio(ratio)} raw (target ≤ 2×: ${ratio <= 2 ? "met" : "MISSED"}), ` +
        `p99 ${formatMicros(r.last20.p99)} (target < 2 ms: ${r.last20.p99 < 2000 ? "met" : "MISSED"})`,
    );
  }
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
  const rows: Row[] = [];
  for (const scale of SCALES) {
    console.log(
      `# ${scale.label} messages: ${scale.sessions.toLocaleString("en")} sessions × ${scale.messagesPerSession}`,
    );
    rows.push(...(await benchScale(scale)));
  }
  report(rows);
  await benchLocks();
}

await main();
