/**
 * A probe: the server CPU of one append statement as schema version 12 sent it (`threadkeep_append_held`
 * with the cap and the release as calls of their own) against version 13's `threadkeep_append_fenced`,
 * alternating rounds on one connection (CPU of its backend from `/proc/<pid>/schedstat`), in two
 * shapes: a public-API append (`Memory` without a summarizer: one message, cap 200) and a turn's
 * commit (two messages, fenced, summary-bounded cap 200, the lease released; each call's grant is
 * made beforehand on another connection, outside the figures). Each statement is its own transaction.
 *   THREADKEEP_BENCH_POSTGRES_URL=… npx tsx bench/_pg-commit-probe.ts
 */
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import postgres from "postgres";
import { createPostgresStore } from "../src/stores/postgres/index.js";

const URL_ = process.env.THREADKEEP_BENCH_POSTGRES_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const ROUNDS = Number(process.env.ROUNDS ?? 9);
const CALLS = Number(process.env.CALLS ?? 300);
const SESSIONS = 600;
const schema = `tk_probe_commit_${randomBytes(4).toString("hex")}`;
const cpuOf = (pid: number) => Number(readFileSync(`/proc/${pid}/schedstat`, "utf8").split(" ")[0]) / 1000;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const sid = (s: number) => `probe-${String(s).padStart(5, "0")}`;
const body = (n: number) => JSON.stringify({ role: "user", content: `message number ${n} of the probe, a sentence of a few words` });

const store = createPostgresStore({ url: URL_, schema, poolSize: 1, searchIndexDelayMs: 3_600_000 });
const sql = postgres(URL_, { max: 1, onnotice: () => {}, connection: { search_path: schema }, types: { bigint: postgres.BigInt } });
const admin = postgres(URL_, { max: 1, onnotice: () => {}, connection: { search_path: schema } });
try {
  for (let s = 0; s < SESSIONS; s++) {
    await store.createSession({ id: sid(s), userId: "u" });
    await store.appendMessages(sid(s), Array.from({ length: 20 }, (_, m) => ({ role: "user" as const, content: `m${m}` })));
  }
  const [{ pid }] = await sql<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`;
  await admin`VACUUM ANALYZE`;
  let k = 0;
  const next = () => sid(k++ % SESSIONS);
  const grant = async (id: string) => {
    const [{ fence }] = await admin<{ fence: string }[]>`
      INSERT INTO leases AS l (session_id, fence, expires_at, holder) VALUES (${id}, nextval('lease_fence'), threadkeep_now_ms() + 60000, 'h')
      ON CONFLICT (session_id) DO UPDATE SET fence = excluded.fence, expires_at = excluded.expires_at, holder = 'h' RETURNING fence`;
    return Number(fence);
  };
  const owned = (id: string) => sql`EXISTS (SELECT 1 FROM sessions WHERE id = ${id} AND user_id = 'u' AND last_activity_at >= ${-9e15})`;
  const subjects: Record<string, (id: string, fence: number) => Promise<unknown>> = {
    "v12 append (API)": (id) => sql`
      WITH w AS (SELECT out_status, out_first_seq, out_created_at FROM threadkeep_append_held(${id}, ${[body(k)]}::text[], ${[body(k)]}::text[], 200::bigint, NULL::bigint, NULL::text, NULL::regconfig) WHERE ${owned(id)})
      SELECT out_status, out_first_seq, out_created_at FROM w`,
    "v13 append (API)": (id) => sql`
      SELECT out_status, out_first_seq, out_created_at, out_waiting FROM threadkeep_append_fenced(${id}, ${[body(k)]}::text[], ${[body(k)]}::text[], 200::bigint, false, NULL::bigint, NULL::text, false, NULL::regconfig) WHERE ${owned(id)}`,
    "v12 turn commit": (id, fence) => sql`
      WITH w AS (SELECT out_status, out_first_seq, out_created_at FROM threadkeep_append_held(${id}, ${[body(k), body(k + 1)]}::text[], ${[body(k), body(k + 1)]}::text[], NULL::bigint, ${fence}::bigint, 'h'::text, NULL::regconfig) WHERE ${owned(id)})
      SELECT out_status, out_first_seq, out_created_at,
        CASE WHEN w.out_status = 'ok' THEN threadkeep_cap_summarized(${id}, 200::bigint) END AS capped,
        CASE WHEN w.out_status IN ('ok', 'replayed') THEN threadkeep_release_written(${id}, ${fence}::bigint) END AS waiting FROM w`,
    "v13 turn commit": (id, fence) => sql`
      SELECT out_status, out_first_seq, out_created_at, out_waiting FROM threadkeep_append_fenced(${id}, ${[body(k), body(k + 1)]}::text[], ${[body(k), body(k + 1)]}::text[], 200::bigint, true, ${fence}::bigint, 'h'::text, true, NULL::regconfig) WHERE ${owned(id)}`,
  };
  const cpu: Record<string, number[]> = {};
  const wall: Record<string, number[]> = {};
  for (let round = 0; round < ROUNDS + 1; round++) {
    for (const [name, call] of Object.entries(subjects)) {
      const turn = name.includes("turn");
      let used = 0;
      for (let i = 0; i < CALLS; i++) {
        const id = next();
        const fence = turn ? await grant(id) : 0;
        const at = cpuOf(pid);
        const t0 = performance.now();
        const [row] = (await call(id, fence)) as { out_status: string }[];
        (wall[name] ??= []).push((performance.now() - t0) * 1000);
        used += cpuOf(pid) - at;
        if (row.out_status !== "ok") throw new Error(`${name}: ${row.out_status}`);
      }
      if (round > 0) (cpu[name] ??= []).push(used / CALLS);
    }
  }
  console.log(`| subject | server CPU µs per call, median (min–max of ${ROUNDS} rounds × ${CALLS}) | wall p50 µs |`);
  console.log("| --- | --- | --- |");
  for (const name of Object.keys(subjects)) {
    const xs = cpu[name];
    console.log(`| ${name} | ${median(xs).toFixed(0)} (${Math.min(...xs).toFixed(0)}–${Math.max(...xs).toFixed(0)}) | ${median(wall[name]).toFixed(0)} |`);
  }
} finally {
  await store.close();
  await sql.end();
  await admin.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await admin.end();
}
