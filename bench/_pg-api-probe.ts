/**
 * Profiling helper (not part of `npm run bench`): what `Memory` adds over the PostgreSQL store on the
 * api bench's two calls ("last 20" and "append 1", bench/api.ts), and the store over raw postgres.js.
 * Subjects, each timed in alternating rounds on one loaded schema: the raw baselines of the api bench
 * (one connection), the store as the bench's "store (contract)" row calls it (no owner), the store
 * owner-scoped (what `Memory` asks of it), `Memory`, and statements sent by a raw client with the
 * store's bigint parser: `stmt` (the unscoped read, and the schema version 13 append), `stmtown` (both
 * owner-scoped as before version 15: the read with its seq range, the append under an `EXISTS`),
 * `v15` (the version 15 append, owner checked inside) and `nobetween` (the owner-scoped read without
 * the unbounded seq range). Per subject: the median round's p50, the paired difference to the first
 * subject round by round, the client's CPU per call (`process.cpuUsage`) and the server's (its
 * backends' `/proc/<pid>/schedstat`, so the server must run on this machine). Scratch copies of the
 * append (the owner inside, one message by VALUES, scalar arguments, a single SQL statement) were
 * measured with this file's first version (a7731a3).
 *
 *   ONLY=raw,store,owned,memory ROUNDS=9 INDEX_DELAY_MS=100000000 npx tsx bench/_pg-api-probe.ts
 *
 * `THREADKEEP_BENCH_POSTGRES_URL` (else `THREADKEEP_TEST_POSTGRES_URL`, else the local service); the
 * data (1,000 sessions × 100 messages) stays in the schema `SCHEMA` (default `bench_api_probe`).
 * `INDEX_DELAY_MS` sets the store's search-index delay (default: the store's own; a large one keeps the
 * background drain's work out of the appends' server CPU). Schema version 15 or later (`v15`).
 */
import postgres from "postgres";
import { serverCpuNs } from "./_pg-backend-cpu.js";
import { createMemory } from "../src/create-memory.js";
import type { MessageInput } from "../src/core/types.js";
import { createPostgresStore } from "../src/stores/postgres/index.js";
import { toMessage, type MessageRow, bodyOf, searchable } from "../src/stores/postgres/_rows.js";
import { messageText } from "../src/stores/_util.js";
import { seededRandom } from "./_harness.js";
import { messageOf, sessionIdOf } from "./_store-data.js";

const URL_ = process.env.THREADKEEP_BENCH_POSTGRES_URL ?? process.env.THREADKEEP_TEST_POSTGRES_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const SCHEMA = process.env.SCHEMA ?? "bench_api_probe";
const SESSIONS = 1000;
const PER = 100;
const READS = Number(process.env.READS ?? 1000);
const APPENDS = Number(process.env.APPENDS ?? 200);
const ROUNDS = Number(process.env.ROUNDS ?? 7);
const ONLY = process.env.ONLY?.split(",");
const owner = (id: string) => `user-${Number.parseInt(id.slice(-12), 16) % 500}`;

interface Subject {
  app: string;
  read(id: string): Promise<unknown>;
  append(id: string, m: MessageInput): Promise<unknown>;
}

async function main() {
  const delay = process.env.INDEX_DELAY_MS === undefined ? undefined : Number(process.env.INDEX_DELAY_MS);
  const store = createPostgresStore({ url: URL_, schema: SCHEMA, poolSize: 10, searchIndexDelayMs: delay });
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
    await admin.unsafe(`CREATE TABLE "${SCHEMA}".raw_messages (session_id text, seq bigint, body text, PRIMARY KEY (session_id, seq))`);
  }
  // Each run starts from the same data: the timed appends of the last run are gone.
  await admin.unsafe(`DELETE FROM "${SCHEMA}".messages WHERE seq > ${PER}`);
  await admin.unsafe(`UPDATE "${SCHEMA}".sessions SET last_seq = ${PER}, last_activity_at = "${SCHEMA}".threadkeep_now_ms()`);
  await admin.unsafe(`TRUNCATE "${SCHEMA}".raw_messages`);
  await admin.unsafe(`VACUUM ANALYZE "${SCHEMA}".messages`);
  await admin.unsafe(`VACUUM ANALYZE "${SCHEMA}".sessions`);
  await admin.unsafe(`VACUUM ANALYZE "${SCHEMA}".raw_messages`);
  const bigint = { to: 20, from: [20], serialize: (x: number) => String(x), parse: (x: string) => Number(x) };
  const raw = postgres(URL_, { max: 1, onnotice: () => {}, connection: { search_path: SCHEMA, application_name: "probe_raw" } });
  const rawT = postgres(URL_, { max: 1, onnotice: () => {}, types: { bigint }, connection: { search_path: SCHEMA, application_name: "probe_stmt" } });
  const nextSeq = new Map<string, number>();
  const rawAppend = (id: string, m: MessageInput) => {
    const seq = nextSeq.get(id) ?? 1;
    nextSeq.set(id, seq + 1);
    return raw`INSERT INTO raw_messages (session_id, seq, body) VALUES (${id}, ${seq}, ${JSON.stringify(m)})`;
  };
  const stmtAppend = (owned: boolean) => async (id: string, m: MessageInput) => {
    const bodies = [bodyOf(m)];
    const texts = [searchable(messageText(m))];
    const cond = owned
      ? rawT`EXISTS (SELECT 1 FROM sessions WHERE id = ${id} AND user_id = ${owner(id)} AND last_activity_at >= ${Number.MIN_SAFE_INTEGER})`
      : rawT`true`;
    const [row] = await rawT<{ out_status: string; out_first_seq: number; out_created_at: number }[]>`
      SELECT out_status, out_first_seq, out_created_at, out_waiting FROM threadkeep_append_fenced(
        ${id}, ${bodies}::text[], ${texts}::text[], ${200}::bigint, ${false},
        ${null}::bigint, ${null}::text, ${false}, ${null}::regconfig)
      WHERE ${cond} AND ${rawT`true`}`;
    return toMessage({ body: bodies[0], seq: row.out_first_seq, created_at: row.out_created_at });
  };
  const subjects: Record<string, Subject> = {
    raw: { app: "probe_raw", read: (id) => raw`SELECT body FROM messages WHERE session_id = ${id} ORDER BY seq DESC LIMIT 20`, append: rawAppend },
    rawp: {
      app: "probe_raw",
      read: async (id) =>
        (await raw<{ seq: string; body: string }[]>`SELECT seq, body FROM messages WHERE session_id = ${id} ORDER BY seq DESC LIMIT 20`).map((row) => {
          const m = JSON.parse(row.body);
          m.seq = Number(row.seq);
          return m;
        }),
      append: rawAppend,
    },
    store: {
      app: "threadkeep",
      read: (id) => store.getMessages(id, { last: 20 }),
      append: (id, m) => store.appendMessages(id, [m], { maxMessages: 200 }),
    },
    owned: {
      app: "threadkeep",
      read: (id) => store.getMessages(id, { last: 20, owner: { userId: owner(id) } }),
      append: (id, m) => store.appendMessages(id, [m], { maxMessages: 200, owner: { userId: owner(id) } }),
    },
    memory: {
      app: "threadkeep",
      read: (id) => memory.getMessages(id, { last: 20, userId: owner(id) }),
      append: (id, m) => memory.addMessages(id, [m], { userId: owner(id) }),
    },
    stmt: {
      app: "probe_stmt",
      read: async (id) => {
        const rows = await rawT<MessageRow[]>`
          SELECT seq, created_at, body FROM messages WHERE session_id = ${id} AND seq BETWEEN ${Number.MIN_SAFE_INTEGER} AND ${Number.MAX_SAFE_INTEGER}
          ORDER BY seq DESC LIMIT ${20}`;
        return rows.reverse().map(toMessage);
      },
      append: stmtAppend(false),
    },
    stmtown: {
      app: "probe_stmt",
      read: async (id) => {
        const rows = await rawT<MessageRow[]>`
          SELECT seq, created_at, body FROM messages
          WHERE session_id = (SELECT id FROM sessions WHERE id = ${id} AND user_id = ${owner(id)} AND last_activity_at >= ${Number.MIN_SAFE_INTEGER})
            AND seq BETWEEN ${Number.MIN_SAFE_INTEGER} AND ${Number.MAX_SAFE_INTEGER}
          ORDER BY seq DESC LIMIT ${20}`;
        return rows.reverse().map(toMessage);
      },
      append: stmtAppend(true),
    },
    v15: {
      app: "probe_stmt",
      read: (id) => subjects.stmtown.read(id),
      // The store's owner-scoped append statement of schema version 15, sent by the raw client.
      append: async (id, m) => {
        const bodies = [bodyOf(m)];
        const texts = [searchable(messageText(m))];
        const [row] = await rawT<{ out_status: string; out_first_seq: number; out_created_at: number }[]>`
          SELECT out_status, out_first_seq, out_created_at, out_waiting FROM threadkeep_append_scoped(
            ${id}, ${bodies}::text[], ${texts}::text[], ${200}::bigint, ${false},
            ${null}::bigint, ${null}::text, ${false}, ${null}::regconfig, ${owner(id)}::text, ${Number.MIN_SAFE_INTEGER}::bigint)`;
        return toMessage({ body: bodies[0], seq: row.out_first_seq, created_at: row.out_created_at });
      },
    },
    nobetween: {
      app: "probe_stmt",
      read: async (id) => {
        const rows = await rawT<MessageRow[]>`
          SELECT seq, created_at, body FROM messages
          WHERE session_id = (SELECT id FROM sessions WHERE id = ${id} AND user_id = ${owner(id)} AND last_activity_at >= ${Number.MIN_SAFE_INTEGER})
          ORDER BY seq DESC LIMIT ${20}`;
        return rows.reverse().map(toMessage);
      },
      append: (id, m) => subjects.v15.append(id, m),
    },
  };
  const names = Object.keys(subjects).filter((n) => !ONLY || ONLY.includes(n));
  const ids = Array.from({ length: SESSIONS }, (_, s) => sessionIdOf(s));
  for (const n of names) for (let k = 0; k < 20; k++) await subjects[n].read(ids[k]);
  const pidsOf = async (app: string) =>
    (await admin<{ pid: number }[]>`SELECT pid FROM pg_stat_activity WHERE application_name = ${app} AND datname = current_database()`).map((r) => r.pid);
  type Series = { p50: number[]; cpu: number[]; srv: number[] };
  const res: Record<string, { read: Series; append: Series }> = {};
  const p50 = (xs: Float64Array) => [...xs].sort((a, b) => a - b)[xs.length >> 1] * 1000;
  let msg = 0;
  for (let r = 0; r < ROUNDS; r++) {
    for (const n of names) {
      const subject = subjects[n];
      const pids = await pidsOf(subject.app);
      const out = (res[n] ??= { read: { p50: [], cpu: [], srv: [] }, append: { p50: [], cpu: [], srv: [] } });
      for (const kind of ["read", "append"] as const) {
        const count = kind === "read" ? READS : APPENDS;
        const rnd = seededRandom(1 + r + (kind === "append" ? 100 : 0));
        const samples = new Float64Array(count);
        const s0 = serverCpuNs(pids);
        const c0 = process.cpuUsage();
        for (let i = 0; i < count; i++) {
          const id = ids[Math.floor(rnd() * ids.length)];
          const t0 = performance.now();
          if (kind === "read") await subject.read(id);
          else await subject.append(id, messageOf(7, 1_000_000 + msg++));
          samples[i] = performance.now() - t0;
        }
        const c = process.cpuUsage(c0);
        const s = serverCpuNs(pids) - s0;
        out[kind].p50.push(p50(samples));
        out[kind].cpu.push((c.user + c.system) / count);
        out[kind].srv.push(s / 1000 / count);
      }
    }
  }
  const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
  const rng = (xs: number[]) => `${Math.min(...xs).toFixed(0)}–${Math.max(...xs).toFixed(0)}`;
  for (const kind of ["read", "append"] as const) {
    const base = res[names[0]][kind];
    for (const n of names) {
      const s = res[n][kind];
      const ratios = s.p50.map((x, k) => x / base.p50[k]);
      // Paired differences (this subject − the first, round by round) cancel the machine's drift.
      const diff = (a: number[], b: number[]) => med(a.map((x, k) => x - b[k])).toFixed(1).padStart(6);
      console.log(
        `${kind.padEnd(6)} ${n.padEnd(8)} p50 ${med(s.p50).toFixed(1).padStart(6)} µs (${rng(s.p50)})  /${names[0]} ${med(ratios).toFixed(2)}  ` +
          `Δ p50 ${diff(s.p50, base.p50)} cpu ${diff(s.cpu, base.cpu)} srv ${diff(s.srv, base.srv)}  ` +
          `client CPU ${med(s.cpu).toFixed(1).padStart(6)} µs (${rng(s.cpu)})  server CPU ${med(s.srv).toFixed(1).padStart(6)} µs (${rng(s.srv)})`,
      );
    }
  }
  await memory.close();
  await raw.end();
  await rawT.end();
  await admin.end();
}
await main();
