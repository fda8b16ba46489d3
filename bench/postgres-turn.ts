/**
 * Where a PostgreSQL turn's time goes: one session's turns one after another through the store, as the
 * proxy makes them (`openTurn` reading the last 20, then an owner-scoped append of question and answer
 * with `releaseLease` and the proxy's summary-bounded cap of 200), each of the two statements timed
 * apart, with the server CPU of each (`/proc/<backend pid>/schedstat` of the store's one connection,
 * where the server is on this machine) and the client CPU per turn (`process.cpuUsage`, this process:
 * the driver and the store); next to the same turns with
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
import { readFileSync } from "node:fs";
import postgres from "postgres";
import type { FullStore } from "../src/core/types.js";
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
/** Per-round CPU figures (µs per turn or statement): reported as the median and range of rounds. */
type Cpu = Record<string, number[]>;

/** CPU microseconds a backend has used so far (NaN when the server is not on this machine). */
const cpuOf = (pid: number | null) => {
  if (pid === null) return Number.NaN;
  try {
    return Number(readFileSync(`/proc/${pid}/schedstat`, "utf8").split(" ")[0]) / 1000;
  } catch {
    return Number.NaN;
  }
};
const clientCpu = () => {
  const { user, system } = process.cpuUsage();
  return user + system;
};

/**
 * `TURNS` turns of one new session; the open and the commit timed apart (µs), and their server CPU
 * (the backend `pid` of the store's connection) and the client CPU per turn, per round. The backend's
 * CPU is read between the statements (a file read of a few µs, outside both timings).
 */
async function turns(store: FullStore, pid: number | null, label: string, samples: Samples, cpu: Cpu): Promise<void> {
  const userId = "bench";
  const { id } = await store.createSession({ id: `turn-${randomBytes(6).toString("hex")}`, userId });
  let openCpu = 0;
  let commitCpu = 0;
  let client = 0;
  for (let i = 0; i < WARMUP + TURNS; i++) {
    const s0 = cpuOf(pid);
    const c0 = clientCpu();
    const t0 = performance.now();
    const turn = await store.openTurn!(id, { owner: { userId }, last: 20 });
    const t1 = performance.now();
    const c1 = clientCpu();
    const s1 = cpuOf(pid);
    const c2 = clientCpu();
    const t2 = performance.now();
    await store.appendMessages(
      id,
      [
        { role: "user", content: `question ${i}` },
        { role: "assistant", content: `answer ${i}` },
      ],
      {
        fence: turn.lease.fence,
        owner: { userId },
        releaseLease: true,
        maxMessages: 200,
        keepUnsummarized: true,
      },
    );
    const t3 = performance.now();
    const c3 = clientCpu();
    const s2 = cpuOf(pid);
    if (i < WARMUP) continue;
    add(samples, `${label}: open`, (t1 - t0) * 1000);
    add(samples, `${label}: commit`, (t3 - t2) * 1000);
    add(samples, `${label}: turn`, (t1 - t0 + t3 - t2) * 1000);
    openCpu += s1 - s0;
    commitCpu += s2 - s1;
    client += c1 - c0 + c3 - c2;
  }
  add(cpu, `${label}: server CPU, open`, openCpu / TURNS);
  add(cpu, `${label}: server CPU, commit`, commitCpu / TURNS);
  add(cpu, `${label}: client CPU, turn`, client / TURNS);
}

/** The backend of the store's `main` connection: the one that served its last sequential statement. */
async function backendOf(store: FullStore, admin: postgres.Sql, before: number[]): Promise<number | null> {
  await store.listAllSessions({ limit: 1 });
  const rows = await admin<{ pid: number }[]>`
    SELECT pid FROM pg_stat_activity WHERE application_name = 'threadkeep' AND datname = current_database()
      AND pid <> ALL(${before}::int[]) ORDER BY backend_start`;
  return rows.length === 0 ? null : rows[0].pid;
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
  // A pool of one: the turn's statements are sequential, and the store sends them to its `main`
  // connection whatever the pool's size; one connection makes its backend the one to read. The
  // background search-index drain is put off (it would land on that connection, inside some turn's
  // figures): it is per-message work, not part of the turn.
  const settings = { schema, poolSize: 1, searchIndexDelayMs: 3_600_000 };
  const store = createPostgresStore({ url: URL_, ...settings });
  const ceiling = createPostgresStore({ url: asyncUrl.toString(), ...settings });
  const probe = postgres(URL_, { max: 1, onnotice: () => {}, connection: { search_path: schema } });
  const samples: Samples = {};
  const cpu: Cpu = {};
  try {
    const pids = async () => (await admin<{ pid: number }[]>`SELECT pid FROM pg_stat_activity`).map((r) => r.pid);
    const storePid = await backendOf(store, admin, await pids());
    const ceilingPid = await backendOf(ceiling, admin, await pids());
    await probe`CREATE TABLE probe (id int PRIMARY KEY, n bigint NOT NULL)`;
    await probe`INSERT INTO probe VALUES (1, 0)`;
    for (let round = 1; round <= ROUNDS; round++) {
      await turns(store, storePid, "as the store commits", samples, cpu);
      await turns(ceiling, ceilingPid, "synchronous_commit off", samples, cpu);
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
  console.log(
    `\n## PostgreSQL turn, statement by statement (${ROUNDS} rounds × ${TURNS} turns, one session, sequential)\n`,
  );
  printTable(
    ["subject", "p50", "p90", "p99"],
    Object.entries(samples).map(([name, values]) => {
      const sorted = values.sort((a, b) => a - b);
      return [name, ...[50, 90, 99].map((p) => formatMicros(percentile(sorted, p)))];
    }),
  );
  console.log(`\n## CPU per turn, µs: median of the rounds (min–max)\n`);
  printTable(
    ["subject", "median", "range"],
    Object.entries(cpu).map(([name, values]) => {
      const sorted = values.sort((a, b) => a - b);
      return [
        name,
        sorted[Math.floor(sorted.length / 2)].toFixed(0),
        `${sorted[0].toFixed(0)}–${sorted.at(-1)!.toFixed(0)}`,
      ];
    }),
  );
}

await main();
