/**
 * Profiling helper (not part of `npm run bench`): PostgreSQL's owner-scoped "last 20" through `Memory`
 * and the store next to raw postgres.js reads that parse what they read (a pool of ten, every
 * connection opened, and a pool of one), in alternating rounds on one loaded schema: per subject the
 * median round's p50, the client's CPU per read (`process.cpuUsage`) and the server's (the subject's
 * backends, `/proc/<pid>/schedstat`, so the server must run on this machine). `raw*` variants time
 * the store's statement shapes on the raw client.
 *
 *   npx tsx bench/_pg-read-probe.ts                       every subject
 *   ONLY=raw10,raw1,store,memory ROUNDS=9 npx tsx bench/_pg-read-probe.ts
 *
 * The server is `THREADKEEP_BENCH_POSTGRES_URL`, else `THREADKEEP_TEST_POSTGRES_URL`, else the local
 * service; the data (1,000 sessions × 100 messages) stays in the schema `SCHEMA` (default
 * `bench_read`) for the next run.
 */
import postgres from "postgres";
import { serverCpuNs } from "./_pg-backend-cpu.js";
import { createMemory } from "../src/create-memory.js";
import { createPostgresStore } from "../src/stores/postgres/index.js";
import { messageOf, sessionIdOf } from "./_store-data.js";
import { seededRandom } from "./_harness.js";

const URL_ =
  process.env.THREADKEEP_BENCH_POSTGRES_URL ??
  process.env.THREADKEEP_TEST_POSTGRES_URL ??
  "postgres://postgres@127.0.0.1:5432/test";
const SCHEMA = process.env.SCHEMA ?? "bench_read";
const SESSIONS = 1000;
const PER = 100;
const READS = Number(process.env.READS ?? 2000);
const ROUNDS = Number(process.env.ROUNDS ?? 7);
const POOL = Number(process.env.POOL ?? 10);
const ONLY = process.env.ONLY?.split(",");

const owner = (id: string) => `user-${Number.parseInt(id.slice(-12), 16) % 500}`;

async function main() {
  const store = createPostgresStore({ url: URL_, schema: SCHEMA, poolSize: POOL });
  const memory = createMemory({ store, ttlMs: 0, maxMessages: 200 });
  const admin = postgres(URL_, { max: 1, onnotice: () => {} });
  const have = await store.listAllSessions({ limit: 1 });
  if (have.sessions.length === 0) {
    console.log("loading");
    let next = 0;
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        for (let s = next++; s < SESSIONS; s = next++) {
          const id = sessionIdOf(s);
          await store.createSession({ id, userId: `user-${s % 500}` });
          await store.appendMessages(id, Array.from({ length: PER }, (_, i) => messageOf(s, i)));
        }
      }),
    );
    await admin.unsafe(`VACUUM ANALYZE "${SCHEMA}".messages`);
    await admin.unsafe(`VACUUM ANALYZE "${SCHEMA}".sessions`);
  }
  const raw = postgres(URL_, { max: POOL, onnotice: () => {}, connection: { search_path: SCHEMA, application_name: "rawbench" } });
  const raw1 = postgres(URL_, { max: 1, onnotice: () => {}, connection: { search_path: SCHEMA, application_name: "rawbench1" } });
  const parsed = (sql: postgres.Sql) => async (id: string) =>
    (await sql<{ seq: string; body: string }[]>`SELECT seq, body FROM messages WHERE session_id = ${id} ORDER BY seq DESC LIMIT 20`).map((row) => {
      const m = JSON.parse(row.body);
      m.seq = Number(row.seq);
      return m;
    });
  const subjects: Record<string, [string, (id: string) => Promise<unknown>]> = {
    raw10: ["rawbench", parsed(raw)],
    raw1: ["rawbench1", parsed(raw1)],
    store: ["threadkeep", (id) => store.getMessages(id, { last: 20, owner: { userId: owner(id) } })],
    rawstore: ["rawbench", async (id) => {
      const rows = await raw<{ seq: string; created_at: string; body: string }[]>`
      SELECT seq, created_at, body FROM messages
      WHERE session_id = (SELECT id FROM sessions WHERE id = ${id} AND user_id = ${owner(id)}
          AND last_activity_at >= ${Number.MIN_SAFE_INTEGER})
        AND seq BETWEEN ${1} AND ${Number.MAX_SAFE_INTEGER}
      ORDER BY seq DESC LIMIT ${20}`;
      return rows.map((row) => { const m = JSON.parse(row.body); m.seq = Number(row.seq); m.createdAt = Number(row.created_at); return m; });
    }],
    rawjoin: ["rawbench", async (id) => {
      const rows = await raw<{ seq: string; created_at: string; body: string }[]>`
      SELECT m.seq, m.created_at, m.body FROM sessions s JOIN messages m ON m.session_id = s.id
      WHERE s.id = ${id} AND s.user_id = ${owner(id)} AND s.last_activity_at >= ${Number.MIN_SAFE_INTEGER}
      ORDER BY m.seq DESC LIMIT 20`;
      return rows.map((row) => { const m = JSON.parse(row.body); m.seq = Number(row.seq); m.createdAt = Number(row.created_at); return m; });
    }],
    rawcols: ["rawbench", async (id) => {
      const rows = await raw<{ seq: string; created_at: string; body: string }[]>`
      SELECT seq, created_at, body FROM messages WHERE session_id = ${id} ORDER BY seq DESC LIMIT 20`;
      return rows.map((row) => { const m = JSON.parse(row.body); m.seq = Number(row.seq); m.createdAt = Number(row.created_at); return m; });
    }],
    memory: ["threadkeep", (id) => memory.getMessages(id, { last: 20, userId: owner(id) })],
    // The store's owner-scoped statement with the window as one JSON document (one row, one parse).
    rawdoc1: ["rawbench1", async (id) => {
      const [row] = await raw1<{ doc: string | null }[]>`
      SELECT string_agg(concat('[', t.seq, ',', t.created_at, ',', t.body, ']'), ',' ORDER BY t.seq) AS doc FROM (
        SELECT seq, created_at, body FROM messages
        WHERE session_id = (SELECT id FROM sessions WHERE id = ${id} AND user_id = ${owner(id)}
            AND last_activity_at >= ${Number.MIN_SAFE_INTEGER})
          AND seq BETWEEN ${1} AND ${Number.MAX_SAFE_INTEGER}
        ORDER BY seq DESC LIMIT ${20}) t`;
      const list = JSON.parse(`[${row.doc}]`) as [number, number, Record<string, unknown>][];
      return list.map(([seq, createdAt, m]) => { m.seq = seq; m.createdAt = createdAt; return m; });
    }],
  };
  const names = Object.keys(subjects).filter((n) => !ONLY || ONLY.includes(n));
  const ids = Array.from({ length: SESSIONS }, (_, s) => sessionIdOf(s));
  // Open every pooled connection.
  for (const n of names) await Promise.all(Array.from({ length: POOL * 2 }, (_, k) => subjects[n][1](ids[k])));
  const pidsOf = async (app: string) =>
    (await admin<{ pid: number }[]>`SELECT pid FROM pg_stat_activity WHERE application_name = ${app} AND datname = current_database()`).map((r) => r.pid);
  const res: Record<string, { p50: number[]; cpu: number[]; srv: number[] }> = {};
  for (let r = 0; r < ROUNDS; r++) {
    for (const n of names) {
      const [app, fn] = subjects[n];
      const pids = await pidsOf(app);
      const rnd = seededRandom(1 + r);
      const samples = new Float64Array(READS);
      const s0 = serverCpuNs(pids);
      const c0 = process.cpuUsage();
      for (let i = 0; i < READS; i++) {
        const id = ids[Math.floor(rnd() * ids.length)];
        const t0 = performance.now();
        await fn(id);
        samples[i] = performance.now() - t0;
      }
      const c = process.cpuUsage(c0);
      const s = serverCpuNs(pids) - s0;
      samples.sort();
      (res[n] ??= { p50: [], cpu: [], srv: [] }).p50.push(samples[READS >> 1] * 1000);
      res[n].cpu.push((c.user + c.system) / READS);
      res[n].srv.push(s / 1000 / READS);
    }
  }
  const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
  const base = res[names[0]];
  for (const n of names) {
    const ratios = res[n].p50.map((x, k) => x / base.p50[k]);
    console.log(
      `${n.padEnd(8)} p50 ${med(res[n].p50).toFixed(1)} µs  ratio ${med(ratios).toFixed(3)}  clientCPU ${med(res[n].cpu).toFixed(1)} µs/op  serverCPU ${med(res[n].srv).toFixed(1)} µs/op`,
    );
  }
  await memory.close();
  await raw.end();
  await raw1.end();
  await admin.end();
}
await main();
