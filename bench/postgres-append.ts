/**
 * What one PostgreSQL append costs the server: CPU of the backend per `memory.addMessages` of one
 * message (`/proc/<backend pid>/schedstat` of the store's one pooled connection, so the wall time's
 * WAL-flush waits and the machine's load weigh little), next to a raw one-row INSERT on its own
 * connection, in alternating rounds; WAL records and bytes of one call of each (`EXPLAIN (ANALYZE,
 * WAL)`); how many session updates were HOT; and the CPU per message of the background search-index
 * drain, which schema v12 moved out of the append. Data: 1,000 sessions × 100 messages (`BENCH_QUICK=1`:
 * 250 × 100), cap 200 not reached.
 *
 * Needs the server on this machine (it reads the backends' /proc entries); otherwise it skips with a
 * printed reason. The server is `THREADKEEP_BENCH_POSTGRES_URL`, else `THREADKEEP_TEST_POSTGRES_URL`,
 * else the local service. Everything lives in a schema `tk_bench_append_<random>`, dropped afterwards.
 */
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import postgres from "postgres";
import { createMemory } from "../src/create-memory.js";
import { createPostgresStore } from "../src/stores/postgres/index.js";
import { printTable, QUICK } from "./_harness.js";
import { messageOf, sessionIdOf } from "./_store-data.js";

const URL_ =
  process.env.THREADKEEP_BENCH_POSTGRES_URL ?? process.env.THREADKEEP_TEST_POSTGRES_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const SESSIONS = QUICK ? 250 : 1_000;
const PER_SESSION = 100;
const ROUNDS = 7;
const APPENDS = 300;
const schema = `tk_bench_append_${randomBytes(4).toString("hex")}`;
const owner = (s: number) => `user-${s % 500}`;

/** CPU microseconds a backend has used so far. */
const cpuOf = (pid: number) => Number(readFileSync(`/proc/${pid}/schedstat`, "utf8").split(" ")[0]) / 1000;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function main(): Promise<void> {
  const admin = postgres(URL_, { max: 1, onnotice: () => {}, connection: { search_path: schema } });
  const raw = postgres(URL_, { max: 1, onnotice: () => {}, connection: { search_path: schema } });
  try {
    const [{ pid: rawPid }] = await raw<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`;
    try {
      cpuOf(rawPid);
    } catch {
      console.log(`skipped: the PostgreSQL backends are not on this machine (no /proc/${rawPid}/schedstat)`);
      return;
    }
    await run(admin, raw, rawPid);
  } finally {
    await admin.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await Promise.all([admin.end(), raw.end()]);
  }
}

async function run(admin: postgres.Sql, raw: postgres.Sql, rawPid: number): Promise<void> {
  // A long delay: the drain is measured apart, not inside the appends' rounds.
  const store = createPostgresStore({ url: URL_, schema, poolSize: 1, searchIndexDelayMs: 3_600_000 });
  const memory = createMemory({ store, ttlMs: 0, maxMessages: 200 });
  // The store's connection is the one that was not there before it opened.
  const others = (await admin<{ pid: number }[]>`SELECT pid FROM pg_stat_activity`).map((r) => r.pid);
  try {
    for (let s = 0; s < SESSIONS; s++) {
      await store.createSession({ id: sessionIdOf(s), userId: owner(s) });
      await store.appendMessages(sessionIdOf(s), Array.from({ length: PER_SESSION }, (_, m) => messageOf(s, m)));
    }
    await raw`CREATE TABLE raw_messages (session_id text, seq bigint, body text, PRIMARY KEY (session_id, seq))`;
    const drainable = (await admin`SELECT 1 FROM pg_proc WHERE proname = 'threadkeep_index_pending'`).length > 0;
    const drain = async () => {
      let rows = 0;
      for (;;) {
        const [{ n }] = await admin<{ n: number }[]>`SELECT threadkeep_index_pending('english', 200) AS n`;
        rows += n;
        if (n < 200) return rows;
      }
    };
    if (drainable) await drain();
    await admin`VACUUM ANALYZE messages`;
    await admin`VACUUM ANALYZE sessions`;
    const opened = await admin<{ pid: number }[]>`
      SELECT pid FROM pg_stat_activity WHERE application_name = 'threadkeep' AND datname = current_database()
        AND pid <> ALL(${others}::int[])`;
    if (opened.length !== 1) throw new Error(`expected the store's one connection, found ${opened.length}`);
    const storePid = opened[0].pid;
    let k = 0;
    const append = () => {
      const s = (k * 7919) % SESSIONS;
      k++;
      return memory.addMessages(sessionIdOf(s), [messageOf(s, PER_SESSION + k)], { userId: owner(s) });
    };
    let r = 0;
    const insert = () => {
      const s = (r * 7919) % SESSIONS;
      r++;
      return raw`INSERT INTO raw_messages (session_id, seq, body) VALUES (${sessionIdOf(s)}, ${r}, ${JSON.stringify(messageOf(s, r))})`;
    };
    for (let i = 0; i < 100; i++) await Promise.all([append(), insert()]);
    const samples = { store: [] as number[], raw: [] as number[] };
    const [before] = await admin<{ upd: number; hot: number }[]>`
      SELECT n_tup_upd::int AS upd, n_tup_hot_upd::int AS hot FROM pg_stat_user_tables WHERE relname = 'sessions' AND schemaname = ${schema}`;
    for (let round = 0; round < ROUNDS; round++) {
      let at = cpuOf(rawPid);
      for (let i = 0; i < APPENDS; i++) await insert();
      samples.raw.push((cpuOf(rawPid) - at) / APPENDS);
      at = cpuOf(storePid);
      for (let i = 0; i < APPENDS; i++) await append();
      samples.store.push((cpuOf(storePid) - at) / APPENDS);
    }
    // The statistics collector reports a little later.
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const [after] = await admin<{ upd: number; hot: number }[]>`
      SELECT n_tup_upd::int AS upd, n_tup_hot_upd::int AS hot FROM pg_stat_user_tables WHERE relname = 'sessions' AND schemaname = ${schema}`;
    let drainPerRow = Number.NaN;
    if (drainable) {
      const [{ pid }] = await admin<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`;
      const start = cpuOf(pid);
      const rows = await drain();
      drainPerRow = (cpuOf(pid) - start) / rows;
    }
    const wal = async (statement: postgres.PendingQuery<postgres.Row[]>) => {
      const [row] = await statement;
      const plan = (row["QUERY PLAN"] as { Plan: Record<string, number> }[])[0].Plan;
      return `${plan["WAL Records"]} / ${plan["WAL Bytes"]}`;
    };
    const body = JSON.stringify(messageOf(1, 999));
    const storeWal = await wal(admin`
      EXPLAIN (ANALYZE, WAL, FORMAT JSON) SELECT * FROM threadkeep_append_fenced(${sessionIdOf(1)}, ${[body]}::text[], ${[body.toLowerCase()]}::text[],
        200, false, NULL, NULL, false, NULL::regconfig)`);
    const rawWal = await wal(raw`EXPLAIN (ANALYZE, WAL, FORMAT JSON) INSERT INTO raw_messages (session_id, seq, body) VALUES ('x', 1, ${body})`);
    printTable(
      ["subject", "server CPU µs per append, median / min of rounds", "WAL records / bytes of one"],
      [
        ["raw INSERT", `${median(samples.raw).toFixed(0)} / ${Math.min(...samples.raw).toFixed(0)}`, rawWal],
        ["Memory.addMessages", `${median(samples.store).toFixed(0)} / ${Math.min(...samples.store).toFixed(0)}`, storeWal],
      ],
    );
    console.log(`store / raw, median CPU: ${(median(samples.store) / median(samples.raw)).toFixed(2)}×`);
    console.log(`session updates that were HOT: ${after.hot - before.hot} of ${after.upd - before.upd}`);
    if (drainable) console.log(`background drain: ${drainPerRow.toFixed(1)} µs CPU per message indexed (batches of 200)`);
  } finally {
    await store.close();
  }
}

await main();
