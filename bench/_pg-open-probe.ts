/**
 * A probe: the server and client CPU of opening a turn as the store does (the grant statement with
 * `threadkeep_turn_read` joined laterally) against the grant alone followed, in the same round trip
 * (pipelined on one connection), by the read as a statement of its own, gated on the grant's holder.
 * Alternating rounds on one connection; each lease is released on another connection, outside the figures.
 *   THREADKEEP_BENCH_POSTGRES_URL=… npx tsx bench/_pg-open-probe.ts
 */
import { randomBytes, randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import postgres from "postgres";
import { createPostgresStore } from "../src/stores/postgres/index.js";
import { attemptLease } from "../src/stores/postgres/_lease-statements.js";
import type { PgSql } from "../src/stores/postgres/_schema.js";

const URL_ = process.env.THREADKEEP_BENCH_POSTGRES_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const ROUNDS = Number(process.env.ROUNDS ?? 9);
const CALLS = Number(process.env.CALLS ?? 300);
const SESSIONS = 300;
const schema = `tk_probe_open_${randomBytes(4).toString("hex")}`;
const cpuOf = (pid: number) => Number(readFileSync(`/proc/${pid}/schedstat`, "utf8").split(" ")[0]) / 1000;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const sid = (s: number) => `probe-${String(s).padStart(5, "0")}`;
const clientCpu = () => {
  const { user, system } = process.cpuUsage();
  return user + system;
};

const store = createPostgresStore({ url: URL_, schema, poolSize: 1, searchIndexDelayMs: 3_600_000 });
const sql = postgres(URL_, {
  max: 1,
  onnotice: () => {},
  connection: { search_path: schema },
  types: { bigint: { to: 20, from: [20], serialize: (x: number) => String(x), parse: (x: string) => Number(x) } },
}) as unknown as PgSql;
const admin = postgres(URL_, { max: 1, onnotice: () => {}, connection: { search_path: schema } });
try {
  for (let s = 0; s < SESSIONS; s++) {
    await store.createSession({ id: sid(s), userId: "u" });
    await store.appendMessages(sid(s), Array.from({ length: 100 }, (_, m) => ({ role: "user" as const, content: `message ${m} of the probe, a sentence` })));
  }
  const [{ pid }] = await sql<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`;
  await admin`VACUUM ANALYZE`;
  let k = 0;
  const read = { userId: "u", last: 20 };
  const subjects: Record<string, (id: string, token: string) => Promise<unknown[]>> = {
    "grant + lateral threadkeep_turn_read": (id, token) => attemptLease(sql, id, null, { ttlMs: 60_000, token, read }),
    "grant, then the read pipelined": async (id, token) => {
      const grant = attemptLease(sql, id, null, { ttlMs: 60_000, token });
      const rows = sql`
        WITH s AS (
          SELECT CASE WHEN x.id IS NULL THEN 'missing' WHEN x.user_id <> ${read.userId} THEN 'foreign'
                      WHEN x.last_activity_at < ${null}::bigint THEN 'expired' ELSE 'ok' END AS status,
                 x.created_at, x.last_activity_at, x.metadata
          FROM (SELECT 1) one LEFT JOIN sessions x ON x.id = ${id}
          WHERE EXISTS (SELECT 1 FROM leases l WHERE l.session_id = ${id} AND l.holder = ${token})
        )
        SELECT 'session'::text AS o_kind, s.status AS o_status,
               CASE WHEN s.status = 'ok' THEN s.created_at END AS o_created_at, CASE WHEN s.status = 'ok' THEN s.last_activity_at END AS o_last_activity_at,
               CASE WHEN s.status = 'ok' THEN s.metadata END AS o_metadata, st.version AS o_state_version, st.data AS o_state_data,
               NULL::bigint AS o_seq, NULL::text AS o_body, NULL::bigint AS o_id, NULL::bigint AS o_from_seq, NULL::bigint AS o_to_seq, NULL::text AS o_content
        FROM s LEFT JOIN session_state st ON st.session_id = ${id} AND s.status = 'ok'
        UNION ALL
        SELECT 'message'::text, NULL::text, t.created_at, NULL::bigint, NULL::text, NULL::integer, NULL::text,
               t.seq, t.body, NULL::bigint, NULL::bigint, NULL::bigint, NULL::text
        FROM (
          SELECT mm.seq, mm.created_at, mm.body FROM s, messages mm
          WHERE s.status = 'ok' AND mm.session_id = ${id} ORDER BY mm.seq DESC LIMIT ${read.last}
        ) t
        UNION ALL
        SELECT 'summary'::text, NULL::text, x.created_at, NULL::bigint, x.metadata, NULL::integer, NULL::text,
               NULL::bigint, NULL::text, x.id, x.from_seq, x.to_seq, x.content
        FROM s, summaries x WHERE s.status = 'ok' AND x.session_id = ${id}`;
      const [g, r] = await Promise.all([grant, rows]);
      return [...g, ...r];
    },
  };
  const cpu: Record<string, number[]> = {};
  const client: Record<string, number[]> = {};
  const wall: Record<string, number[]> = {};
  for (let round = 0; round < ROUNDS + 1; round++) {
    for (const [name, call] of Object.entries(subjects)) {
      let used = 0;
      let usedClient = 0;
      for (let i = 0; i < CALLS; i++) {
        const id = sid(k++ % SESSIONS);
        const token = randomUUID();
        const at = cpuOf(pid);
        const c0 = clientCpu();
        const t0 = performance.now();
        const rows = await call(id, token);
        (wall[name] ??= []).push((performance.now() - t0) * 1000);
        usedClient += clientCpu() - c0;
        used += cpuOf(pid) - at;
        if (rows.length < 21) throw new Error(`${name}: ${rows.length} rows`);
        await admin`UPDATE leases SET expires_at = 0 WHERE session_id = ${id}`;
      }
      if (round > 0) {
        (cpu[name] ??= []).push(used / CALLS);
        (client[name] ??= []).push(usedClient / CALLS);
      }
    }
  }
  const fmt = (xs: number[]) => `${median(xs).toFixed(0)} (${Math.min(...xs).toFixed(0)}–${Math.max(...xs).toFixed(0)})`;
  console.log(`| subject | server CPU µs per open (${ROUNDS} rounds × ${CALLS}) | client CPU µs per open | wall p50 µs |`);
  console.log("| --- | --- | --- | --- |");
  for (const name of Object.keys(subjects)) console.log(`| ${name} | ${fmt(cpu[name])} | ${fmt(client[name])} | ${median(wall[name]).toFixed(0)} |`);
} finally {
  await store.close();
  await sql.end();
  await admin.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await admin.end();
}
