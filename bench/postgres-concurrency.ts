/**
 * `npm run bench -- postgres-concurrency`: PostgreSQL turns under concurrency (issue 34). 20 workers,
 * each doing turns back to back on a random one of 2,000 sessions of 20 messages of 200 characters: a
 * turn loads the last 20 messages and appends 2 (question and answer). Subjects, on the same server:
 *
 * - threadkeep: `openTurn` (lease and last 20 in one statement) then the fenced, owner-scoped append
 *   that releases the lease (the proxy's turn, as `bench/postgres-turn.ts` times one at a time);
 * - LangChain-style: a plain table `(id serial, session_id text, message jsonb)` with an index on
 *   `session_id`, as LangChain's `PostgresChatMessageHistory` keeps it, read `ORDER BY id DESC LIMIT 20`
 *   and appended with one INSERT of two rows, through postgres.js with `prepare: false` (what the `pg`
 *   pool does for unnamed statements: parse and plan each time; `pg` itself is not a dependency);
 * - raw postgres.js: the same table and statements, prepared (postgres.js's default);
 * - a reference, not a target: the LangChain-style table given what threadkeep's turn does besides
 *   (`BENCH_REFERENCE`, by default `lease,fts`, both):
 *   - `lease`: a turn lease at its least, in the same two round trips: the read takes it (an `UPDATE`
 *     of the session's row in a lease table, fence and lapse, committed without waiting for the WAL
 *     flush, as threadkeep's grant) and the append gives it back in its statement, inserting only
 *     while the fence is still the row's. Unlike threadkeep's it keeps no waiting line, no holder, no
 *     owner check and reads in the grant's snapshot; a worker whose session is held tries again 1 ms later;
 *   - `advisory` (not in the default): the lease as a session-level advisory lock instead of a row, on the
 *     connection the session's turns use (such a lock belongs to its backend); the read takes it and then
 *     reads in a fresh snapshot, the append runs on the same connection and the unlock follows it. No
 *     transaction id, no WAL, let go when the connection ends: what a lease that writes nothing costs
 *     (decision record 0003, "Next step");
 *   - `fts`: what full-text search needs, a stored `tsvector` column generated from the content
 *     (`english`) and a GIN index on it (threadkeep indexes every message for relevance search:
 *     `postgres/_indexing.ts`).
 *
 *   It shows what those features cost a table that does nothing else: how much of the distance to the
 *   baselines is threadkeep's and how much is theirs.
 *
 * Each subject has a pool of {@link POOL} connections, 10 by default: the default of all three
 * libraries (`pg`'s `Pool`, postgres.js's `max`, threadkeep's `poolSize`); `BENCH_POOL` sets every
 * subject's, `BENCH_TK_POOL` threadkeep's alone. Until 2026-12-07 every pool was 20: the baselines run
 * about the same at 10 and 20, threadkeep a sixth slower at 20 (docs/benchmarks.md, seventh pass). Rounds of {@link SECONDS} s alternate between
 * subjects, so a change in the machine's load hits every subject alike; the report gives each
 * subject's median turns/s and the range over rounds. `BENCH_QUICK=1` runs shorter, fewer rounds.
 * Each round also reads the server's CPU per turn from `/proc` (a server on this machine only; every
 * backend of the bench's database counts, so give it a database of its own for that column). Before
 * the rounds, threadkeep's tables get the `VACUUM ANALYZE` the plain tables get after loading, and
 * after the warm-up round every subject's tables are analyzed again (the steady state's statistics).
 * The server is `THREADKEEP_BENCH_POSTGRES_URL`, else `THREADKEEP_TEST_POSTGRES_URL`, else the local
 * service; unreachable, it skips with a printed reason. Everything lives in a schema named
 * `tk_bench_conc_<random>`, dropped afterwards.
 */
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { loadavg } from "node:os";
import postgres from "postgres";
import type { FullStore } from "../src/core/types.js";
import { createPostgresStore } from "../src/stores/postgres/index.js";
import { printTable, QUICK } from "./_harness.js";

const URL_ =
  process.env.THREADKEEP_BENCH_POSTGRES_URL ??
  process.env.THREADKEEP_TEST_POSTGRES_URL ??
  "postgres://postgres@127.0.0.1:5432/test";
const WORKERS = 20;
const SESSIONS = 2_000;
const MESSAGES = 20;
const CHARS = 200;
const POOL = Number(process.env.BENCH_POOL) || 10;
/** threadkeep's own pool (`BENCH_TK_POOL`), to see what the pool size does to it alone; the baselines keep {@link POOL}. */
const TK_POOL = Number(process.env.BENCH_TK_POOL) || POOL;
const SECONDS = QUICK ? 3 : 10;
const ROUNDS = QUICK ? 1 : 3;
const schema = `tk_bench_conc_${randomBytes(4).toString("hex")}`;

/** A message of exactly `CHARS` characters. */
const text = (i: number) => `message ${i} `.padEnd(CHARS, "lorem ipsum dolor sit amet ").slice(0, CHARS);

/** A subject's turn on session number `n`. */
type Turn = (n: number, i: number) => Promise<void>;

/**
 * CPU µs used so far by the other backends of the bench's database (`/proc/<pid>/schedstat`; NaN when
 * the server is not on this machine). Only the measured subject's pool is busy during its round, but
 * every backend of the database counts: give the bench a database of its own for this to be the subject's.
 */
async function serverCpu(admin: postgres.Sql): Promise<number> {
  const rows = await admin<{ pid: number }[]>`
    SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`;
  let total = 0;
  let read = 0;
  for (const { pid } of rows) {
    try {
      total += Number(readFileSync(`/proc/${pid}/schedstat`, "utf8").split(" ")[0]) / 1000;
      read++;
    } catch {
      // A backend that just ended, or a server on another machine.
    }
  }
  return rows.length > 0 && read === 0 ? Number.NaN : total;
}

/**
 * Turns per second of `WORKERS` workers doing `turn` for `SECONDS`, this process's CPU µs per turn, and
 * the server's (see {@link serverCpu}).
 */
async function measure(turn: Turn, admin: postgres.Sql): Promise<{ rate: number; cpu: number; server: number }> {
  const serverStart = await serverCpu(admin);
  const until = performance.now() + SECONDS * 1000;
  const cpuStart = process.cpuUsage();
  let done = 0;
  await Promise.all(
    Array.from({ length: WORKERS }, async () => {
      while (performance.now() < until) {
        await turn(Math.floor(Math.random() * SESSIONS), done);
        done++;
      }
    }),
  );
  const cpu = process.cpuUsage(cpuStart);
  const server = (await serverCpu(admin)) - serverStart;
  return { rate: done / SECONDS, cpu: (cpu.user + cpu.system) / done, server: server / done };
}

/** Runs `fn` over 0..count-1, `width` at a time. */
async function each(count: number, width: number, fn: (n: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < count) await fn(next++);
    }),
  );
}

async function threadkeep(): Promise<{ turn: Turn; close: () => Promise<void> }> {
  const store: FullStore = createPostgresStore({ url: URL_, schema: `${schema}_tk`, poolSize: TK_POOL });
  const userId = "bench";
  const ids = Array.from({ length: SESSIONS }, (_, n) => `conc-${n}`);
  await each(SESSIONS, 10, async (n) => {
    await store.createSession({ id: ids[n], userId });
    await store.appendMessages(
      ids[n],
      Array.from({ length: MESSAGES }, (_, i) => ({ role: i % 2 ? "assistant" : "user", content: text(i) })),
    );
  });
  // The same start as the plain tables get (VACUUM ANALYZE after loading): PostgreSQL's statistics,
  // which autovacuum would gather in time and which a server with autovacuum off never gathers.
  const admin = postgres(URL_, { max: 1, onnotice: () => {} });
  const tables = await admin<
    { name: string }[]
  >`SELECT tablename AS name FROM pg_tables WHERE schemaname = ${`${schema}_tk`}`;
  await admin.unsafe(`VACUUM ANALYZE ${tables.map((t) => `"${schema}_tk"."${t.name}"`).join(", ")}`);
  await admin.end();
  const turn: Turn = async (n, i) => {
    const opened = await store.openTurn!(ids[n], { owner: { userId }, last: 20 });
    await store.appendMessages(
      ids[n],
      [
        { role: "user", content: text(i) },
        { role: "assistant", content: text(i + 1) },
      ],
      {
        fence: opened.lease.fence,
        owner: { userId },
        releaseLease: true,
        maxMessages: 200,
        keepUnsummarized: true,
      },
    );
  };
  return { turn, close: () => store.close() };
}

/** What the reference subject adds to the LangChain-style table (`BENCH_REFERENCE`). */
const REFERENCE = new Set((process.env.BENCH_REFERENCE ?? "lease,fts").split(",").filter(Boolean));
for (const part of REFERENCE) {
  if (part !== "lease" && part !== "fts" && part !== "advisory")
    throw new Error(`BENCH_REFERENCE takes lease, advisory and fts, got "${part}"`);
}
// Two kinds of lease on one table would measure neither (the advisory subject would take every turn).
if (REFERENCE.has("lease") && REFERENCE.has("advisory"))
  throw new Error("BENCH_REFERENCE takes one of lease and advisory, not both");
/** How long the reference's lease lasts unreleased (ms). */
const LEASE_TTL_MS = 60_000;

async function plainTable(
  prepare: boolean,
  name: string,
  add: { fullText?: boolean; lease?: boolean; advisory?: boolean } = {},
): Promise<{ turn: Turn; close: () => Promise<void> }> {
  const sql = postgres(URL_, {
    max: POOL,
    prepare,
    onnotice: () => {},
    connection: { search_path: `${schema}_${name}` },
  });
  await sql.unsafe(`CREATE SCHEMA "${schema}_${name}"`);
  await sql`CREATE TABLE message_store (id serial PRIMARY KEY, session_id text NOT NULL, message jsonb NOT NULL)`;
  await sql`CREATE INDEX message_store_session ON message_store (session_id)`;
  if (add.fullText) {
    await sql`ALTER TABLE message_store ADD COLUMN tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', message->>'content')) STORED`;
    await sql`CREATE INDEX message_store_tsv ON message_store USING gin (tsv)`;
  }
  await each(SESSIONS, 10, async (n) => {
    const rows = Array.from({ length: MESSAGES }, (_, i) => ({
      session_id: `conc-${n}`,
      message: sql.json({ type: i % 2 ? "ai" : "human", content: text(i) }),
    }));
    await sql`INSERT INTO message_store ${sql(rows, "session_id", "message")}`;
  });
  if (add.lease) {
    await sql`CREATE TABLE turn_lease (session_id text PRIMARY KEY, fence bigint NOT NULL, expires_at bigint NOT NULL)`;
    await sql`INSERT INTO turn_lease SELECT 'conc-' || g, 0, 0 FROM generate_series(0, ${SESSIONS - 1}) g`;
    await sql`VACUUM ANALYZE turn_lease`;
  }
  await sql`VACUUM ANALYZE message_store`;
  if (add.advisory) {
    // The read takes a fresh snapshot once the lock is held (a VOLATILE PL/pgSQL function), as
    // threadkeep's turn read does: a read in the locking statement's own snapshot could miss the
    // append of the holder that unlocked after the snapshot was taken.
    await sql`
      CREATE FUNCTION turn_read(p_session text, p_key bigint) RETURNS SETOF jsonb LANGUAGE plpgsql VOLATILE AS $$
      BEGIN
        IF NOT pg_try_advisory_lock(p_key) THEN RETURN; END IF;
        RETURN QUERY SELECT message FROM message_store WHERE session_id = p_session ORDER BY id DESC LIMIT 20;
      END $$`;
    const connections = await Promise.all(Array.from({ length: POOL }, () => sql.reserve()));
    const held = new Set<number>();
    const advisory: Turn = async (n, i) => {
      const session = `conc-${n}`;
      // A session's lock lives on one connection (session-level advisory locks belong to a backend),
      // so its turns use that connection; in this process a session is held by one worker at a time.
      const c = connections[n % POOL];
      while (held.has(n)) await new Promise((resolve) => setTimeout(resolve, 1));
      held.add(n);
      try {
        for (;;) {
          const rows = await c<{ turn_read: unknown }[]>`SELECT turn_read(${session}, ${n})`;
          if (rows.length > 0) break;
          await new Promise((resolve) => setTimeout(resolve, 1));
        }
        // The unlock follows the append's commit, pipelined on the same connection.
        const append = c`INSERT INTO message_store (session_id, message) VALUES
          (${session}, ${sql.json({ type: "human", content: text(i) })}), (${session}, ${sql.json({ type: "ai", content: text(i + 1) })})`;
        const unlock = c`SELECT pg_advisory_unlock(${n})`;
        await Promise.all([append, unlock]);
      } finally {
        held.delete(n);
      }
    };
    return {
      turn: advisory,
      close: async () => {
        for (const c of connections) c.release();
        await sql.end();
      },
    };
  }
  if (add.lease) {
    const leased: Turn = async (n, i) => {
      const session = `conc-${n}`;
      for (;;) {
        const now = Date.now();
        const rows = await sql<{ fence: string | null; message: unknown }[]>`
          WITH g AS (
            UPDATE turn_lease SET fence = fence + 1, expires_at = ${now + LEASE_TTL_MS}
            WHERE session_id = ${session} AND expires_at <= ${now} RETURNING fence
          )
          SELECT (SELECT fence FROM g) AS fence, set_config('synchronous_commit', 'off', true) AS async_commit, m.message
          FROM (SELECT 1) one LEFT JOIN LATERAL (
            SELECT message FROM message_store WHERE session_id = ${session} ORDER BY id DESC LIMIT 20
          ) m ON true`;
        const fence = rows[0].fence;
        if (fence === null) {
          // Another worker's turn holds the session: wait for it, as threadkeep's waiters do.
          await new Promise((resolve) => setTimeout(resolve, 1));
          continue;
        }
        await sql`
          WITH r AS (
            UPDATE turn_lease SET expires_at = 0 WHERE session_id = ${session} AND fence = ${fence} RETURNING 1
          )
          INSERT INTO message_store (session_id, message)
          SELECT v.s, v.m FROM (VALUES
            (${session}, ${sql.json({ type: "human", content: text(i) })}::jsonb),
            (${session}, ${sql.json({ type: "ai", content: text(i + 1) })}::jsonb)) v(s, m)
          WHERE EXISTS (SELECT 1 FROM r)`;
        return;
      }
    };
    return { turn: leased, close: () => sql.end() };
  }
  const turn: Turn = async (n, i) => {
    const session = `conc-${n}`;
    await sql`SELECT message FROM message_store WHERE session_id = ${session} ORDER BY id DESC LIMIT 20`;
    await sql`INSERT INTO message_store (session_id, message) VALUES
      (${session}, ${sql.json({ type: "human", content: text(i) })}), (${session}, ${sql.json({ type: "ai", content: text(i + 1) })})`;
  };
  return { turn, close: () => sql.end() };
}

async function main(): Promise<void> {
  const admin = postgres(URL_, { max: 1, connect_timeout: 2, onnotice: () => {} });
  try {
    await admin`SELECT 1`;
  } catch (error) {
    console.log(`postgres concurrency benchmark skipped: ${URL_} is not reachable (${(error as Error).message})`);
    await admin.end();
    return;
  }
  const subjects: [string, { turn: Turn; close: () => Promise<void> }][] = [];
  try {
    const t0 = performance.now();
    subjects.push(["threadkeep", await threadkeep()]);
    subjects.push(["LangChain-style table (unprepared, as the pg pool)", await plainTable(false, "lc")]);
    subjects.push(["raw postgres.js (prepared)", await plainTable(true, "raw")]);
    if (REFERENCE.size > 0) {
      const parts = [
        REFERENCE.has("lease") ? "turn lease" : "",
        REFERENCE.has("advisory") ? "advisory-lock lease" : "",
        REFERENCE.has("fts") ? "full-text index" : "",
      ];
      subjects.push([
        `reference: LangChain-style table + ${parts.filter(Boolean).join(" + ")}`,
        await plainTable(false, "ref", {
          fullText: REFERENCE.has("fts"),
          lease: REFERENCE.has("lease"),
          advisory: REFERENCE.has("advisory"),
        }),
      ]);
    }
    console.log(
      `setup: ${SESSIONS} sessions × ${MESSAGES} messages of ${CHARS} characters per subject, ${((performance.now() - t0) / 1000).toFixed(1)} s`,
    );
    const rates = new Map<string, number[]>(subjects.map(([name]) => [name, []]));
    const cpus = new Map<string, number[]>(subjects.map(([name]) => [name, []]));
    const servers = new Map<string, number[]>(subjects.map(([name]) => [name, []]));
    for (const [, subject] of subjects) await measure(subject.turn, admin); // warm-up round, not counted
    // Statistics of the steady state for every subject, as autovacuum would take them on a server that
    // has it on: threadkeep's `leases` was empty when the tables were analyzed after loading.
    const tables = await admin<{ s: string; t: string }[]>`
      SELECT schemaname AS s, tablename AS t FROM pg_tables WHERE schemaname LIKE ${`${schema}%`}`;
    await admin.unsafe(`ANALYZE ${tables.map((r) => `"${r.s}"."${r.t}"`).join(", ")}`);
    for (let round = 0; round < ROUNDS; round++) {
      for (const [name, subject] of subjects) {
        const { rate, cpu, server } = await measure(subject.turn, admin);
        rates.get(name)!.push(rate);
        cpus.get(name)!.push(cpu);
        servers.get(name)!.push(server);
      }
    }
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
    const raw = median(rates.get(subjects[2][0])!);
    console.log(
      `\nPostgreSQL turns, ${WORKERS} workers, pool ${POOL} (threadkeep ${TK_POOL}), ${ROUNDS} rounds of ${SECONDS} s per subject, ${new Date().toISOString()}, load ${loadavg()
        .map((l) => l.toFixed(1))
        .join(" ")}:\n`,
    );
    printTable(
      [
        "subject",
        "turns/s (median)",
        "range over rounds",
        "vs raw",
        "client CPU per turn (median)",
        "server CPU per turn (median)",
      ],
      subjects.map(([name]) => {
        const xs = rates.get(name)!;
        return [
          name,
          median(xs).toFixed(0),
          `${Math.min(...xs).toFixed(0)}–${Math.max(...xs).toFixed(0)}`,
          `${(median(xs) / raw).toFixed(2)}×`,
          `${median(cpus.get(name)!).toFixed(0)} µs`,
          `${median(servers.get(name)!).toFixed(0)} µs`,
        ];
      }),
    );
  } finally {
    for (const [, subject] of subjects) await subject.close().catch(() => {});
    for (const suffix of ["tk", "lc", "raw", "ref"])
      await admin.unsafe(`DROP SCHEMA IF EXISTS "${schema}_${suffix}" CASCADE`);
    await admin.end();
  }
}

await main();
