/**
 * Where a PostgreSQL turn's time goes: one session's turns one after another through the store, as the
 * proxy makes them (`openTurn` reading the last 20, then an owner-scoped append of question and answer
 * with `releaseLease`), each of the two statements timed apart; next to the same turns with
 * `synchronous_commit = off` for the whole connection (no statement waits for a WAL flush: the ceiling
 * of what asynchronous commits can save), and a single-row UPDATE committed durably and asynchronously
 * (what one WAL flush costs on this disk now). Rounds alternate, so a change in the machine's load hits
 * every subject alike.
 *
 * `BENCH_QUICK=1` runs fewer turns. The server is `THREADKEEP_BENCH_POSTGRES_URL`, else
 * `THREADKEEP_TEST_POSTGRES_URL`, else the local service; unreachable, it skips with a printed reason.
 * Everything lives in a schema named `tk_bench_turn_<random>`, dropped afterwards.
 */
import { randomBytes } from "node:crypto";
import postgres from "postgres";
import type { SessionStore } from "../src/core/types.js";
import { createPostgresStore } from "../src/stores/postgres/index.js";
import { formatMicros, percentile, printTable, QUICK } from "./_harness.js";

const URL_ =
  process.env.THREADKEEP_BENCH_POSTGRES_URL ??
  process.env.THREADKEEP_TEST_POSTGRES_URL ??
  "postgres://postgres@127.0.0.1:5432/test";
const ROUNDS = QUICK ? 3 : 5;
const TURNS = QUICK ? 200 : 1000;
const WARMUP = 50;
const schema = `tk_bench_turn_${randomBytes(4).toString("hex")}`;

type Samples = Record<string, number[]>;
const add = (samples: Samples, name: string, us: number) => (samples[name] ??= []).push(us);

/** `TURNS` turns of one new session; the open and the commit timed apart (µs). */
async function turns(store: SessionStore, label: string, samples: Samples): Promise<void> {
  const userId = "bench";
  const { id } = await store.createSession({ id: `turn-${randomBytes(6).toString("hex")}`, userId });
  for (let i = 0; i < WARMUP + TURNS; i++) {
    const t0 = performance.now();
    const turn = await store.openTurn!(id, { owner: { userId }, last: 20 });
    const t1 = performance.now();
    await store.appendMessages(id, [{ role: "user", content: `question ${i}` }, { role: "assistant", content: `answer ${i}` }], {
      fence: turn.lease.fence,
      owner: { userId },
      releaseLease: true,
    });
    const t2 = performance.now();
    if (i < WARMUP) continue;
    add(samples, `${label}: open`, (t1 - t0) * 1000);
    add(samples, `${label}: commit`, (t2 - t1) * 1000);
    add(samples, `${label}: turn`, (t2 - t0) * 1000);
  }
}

/** One row updated `TURNS` times, each its own transaction, committed durably or not. */
async function flushes(sql: postgres.Sql, samples: Samples): Promise<void> {
  for (const mode of ["on", "off"]) {
    for (let i = 0; i < TURNS; i++) {
      const t0 = performance.now();
      await sql`UPDATE probe SET n = n + 1 WHERE id = 1 RETURNING set_config('synchronous_commit', ${mode}, true)`;
      add(samples, `single-row UPDATE, synchronous_commit ${mode}`, (performance.now() - t0) * 1000);
    }
  }
}

async function main(): Promise<void> {
  const admin = postgres(URL_, { max: 1, connect_timeout: 2, onnotice: () => {} });
  try {
    await admin`SELECT 1`;
  } catch (error) {
    console.log(`postgres turn benchmark skipped: ${URL_} is not reachable (${(error as Error).message})`);
    await admin.end();
    return;
  }
  const asyncUrl = new URL(URL_);
  asyncUrl.searchParams.set("synchronous_commit", "off");
  const store = createPostgresStore({ url: URL_, schema });
  const ceiling = createPostgresStore({ url: asyncUrl.toString(), schema });
  const probe = postgres(URL_, { max: 1, onnotice: () => {}, connection: { search_path: schema } });
  const samples: Samples = {};
  try {
    await store.listAllSessions({ limit: 1 });
    await probe`CREATE TABLE probe (id int PRIMARY KEY, n bigint NOT NULL)`;
    await probe`INSERT INTO probe VALUES (1, 0)`;
    for (let round = 1; round <= ROUNDS; round++) {
      await turns(store, "as the store commits", samples);
      await turns(ceiling, "synchronous_commit off", samples);
      await flushes(probe, samples);
      console.log(`round ${round}/${ROUNDS} done`);
    }
  } finally {
    await store.close();
    await ceiling.close();
    await probe.end();
    await admin`DROP SCHEMA IF EXISTS ${admin(schema)} CASCADE`;
    await admin.end();
  }
  console.log(`\n## PostgreSQL turn, statement by statement (${ROUNDS} rounds × ${TURNS} turns, one session, sequential)\n`);
  printTable(
    ["subject", "p50", "p90", "p99"],
    Object.entries(samples).map(([name, values]) => {
      const sorted = values.sort((a, b) => a - b);
      return [name, ...[50, 90, 99].map((p) => formatMicros(percentile(sorted, p)))];
    }),
  );
}

await main();
