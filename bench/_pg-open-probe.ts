/**
 * A probe: the server and client CPU of opening a turn (the grant statement and what the store makes
 * of its answer) as schema version 13 did (`threadkeep_turn_read` joined laterally: a row per message
 * and summary) and as version 14 does (`threadkeep_turn_doc`: one JSON document in the grant's row).
 * (Its first version, in facac63, compared the lateral read with the read as a statement of its own
 * pipelined after the grant: more CPU on both sides, and slower.)
 * Alternating rounds on one connection; each lease is released on another connection, outside the figures.
 *   THREADKEEP_BENCH_POSTGRES_URL=… npx tsx bench/_pg-open-probe.ts
 */
import { randomBytes, randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import postgres from "postgres";
import { createPostgresStore } from "../src/stores/postgres/index.js";
import { attemptLease } from "../src/stores/postgres/_lease-statements.js";
import type { PgSql } from "../src/stores/postgres/_client.js";
import { openedTurnOf } from "../src/stores/postgres/_turn.js";
import { toMessage, toSession, toSummary } from "../src/stores/postgres/_rows.js";
import type { Message, Summary } from "../src/core/types.js";

/** What version 13's store made of the lateral read's rows (its `openedTurnOf`). */
function openedRows(rows: Record<string, never>[]) {
  const head = rows.find((r) => r.o_kind === "session")!;
  const session = toSession({ id: "x", user_id: "u", created_at: head.o_created_at, last_activity_at: head.o_last_activity_at, metadata: head.o_metadata });
  const messages: Message[] = [];
  const summaries: Summary[] = [];
  for (const r of rows) {
    if (r.o_kind === "message") messages.push(toMessage({ seq: r.o_seq, created_at: r.o_created_at, body: r.o_body }));
    else if (r.o_kind === "summary") summaries.push(toSummary({ id: r.o_id, from_seq: r.o_from_seq, to_seq: r.o_to_seq, created_at: r.o_created_at, content: r.o_content, metadata: r.o_metadata }));
  }
  messages.sort((a, b) => a.seq - b.seq);
  return { session, messages, summaries };
}

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
  // Schema version 13's grant: `threadkeep_turn_read` joined laterally, a row per message and summary.
  const lateral = (id: string, token: string) => sql`
    WITH cur AS (
      SELECT expires_at FROM leases WHERE session_id = ${id}
    ), g AS (
      INSERT INTO leases AS l (session_id, fence, expires_at, holder)
      SELECT ${id}, nextval('lease_fence'), threadkeep_now_ms() + 60000, ${token}
      WHERE NOT EXISTS (
        SELECT 1 FROM lease_queue q WHERE q.session_id = ${id} AND q.alive_until > threadkeep_now_ms() AND (${null}::bigint IS NULL OR q.ticket < ${null})
      )
      ON CONFLICT (session_id) DO UPDATE SET fence = excluded.fence, expires_at = excluded.expires_at, holder = excluded.holder
        WHERE l.expires_at <= threadkeep_now_ms()
      RETURNING l.fence, l.expires_at
    ), joined AS (
      INSERT INTO lease_queue (session_id, alive_until, holder)
      SELECT ${id}, threadkeep_now_ms() + 5000, ${token} WHERE ${null}::bigint IS NULL AND NOT EXISTS (SELECT 1 FROM g)
      RETURNING ticket
    ), served AS (
      DELETE FROM lease_queue WHERE ticket = ${null} AND EXISTS (SELECT 1 FROM g)
    ), beat AS (
      UPDATE lease_queue SET alive_until = threadkeep_now_ms() + 5000 WHERE ticket = ${null} AND NOT EXISTS (SELECT 1 FROM g)
    )
    SELECT a.*, set_config('synchronous_commit', 'off', true) AS async_commit, r.* FROM (
      SELECT (SELECT fence FROM g) AS fence, (SELECT expires_at FROM g) AS expires_at,
             (SELECT ticket FROM joined) AS ticket, (SELECT expires_at FROM cur) AS held_until, threadkeep_now_ms() AS now
    ) a LEFT JOIN LATERAL threadkeep_turn_read(a.fence, ${id}, ${read.userId}, ${null}::bigint, ${read.last}::bigint) r ON true`;
  const subjects: Record<string, (id: string, token: string) => Promise<number>> = {
    "v13: grant + lateral threadkeep_turn_read (rows)": async (id, token) => {
      const rows = await lateral(id, token);
      const turn = openedRows(rows as never);
      return turn.messages.length;
    },
    "v14: grant + threadkeep_turn_doc (one document)": async (id, token) => {
      const [row] = await attemptLease(sql, id, null, { ttlMs: 60_000, token, read });
      return openedTurnOf(id, read.userId, row.turn ?? null).messages.length;
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
        const read20 = await call(id, token);
        (wall[name] ??= []).push((performance.now() - t0) * 1000);
        usedClient += clientCpu() - c0;
        used += cpuOf(pid) - at;
        if (read20 !== 20) throw new Error(`${name}: ${read20} messages`);
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
