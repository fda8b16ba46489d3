/**
 * Profiling helper (not part of `npm run bench`): what `Memory` adds over the PostgreSQL store on the
 * api bench's two calls ("last 20" and "append 1", bench/api.ts), and the store over raw postgres.js.
 * Subjects, each timed in alternating rounds on one loaded schema: the raw baselines of the api bench
 * (one connection), the store as the bench's "store (contract)" row calls it (no owner), the store
 * owner-scoped (what `Memory` asks of it), `Memory`, and the store's two statements sent by a raw client
 * with the store's bigint parser (`stmt`: no owner; `stmtown`: owner-scoped). Per subject: the median
 * round's p50, the client's CPU per call (`process.cpuUsage`) and the server's (its backends'
 * `/proc/<pid>/schedstat`, so the server must run on this machine).
 *
 *   ONLY=raw,store,owned,memory ROUNDS=9 npx tsx bench/_pg-api-probe.ts
 *
 * `THREADKEEP_BENCH_POSTGRES_URL` (else `THREADKEEP_TEST_POSTGRES_URL`, else the local service); the
 * data (1,000 sessions × 100 messages) stays in the schema `SCHEMA` (default `bench_api_probe`).
 * `INDEX_DELAY_MS` sets the store's search-index delay (default: the store's own).
 */
import { readFileSync } from "node:fs";
import postgres from "postgres";
import { createMemory } from "../src/core/memory.js";
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

/** CPU time of these backends so far, in ns. */
function serverCpuNs(pids: number[]): number {
  let t = 0;
  for (const p of pids) {
    try {
      t += Number(readFileSync(`/proc/${p}/schedstat`, "utf8").split(" ")[0]);
    } catch {
      // The backend ended.
    }
  }
  return t;
}


/** A scratch copy of `threadkeep_append_fenced` with the owner checked by its session UPDATE (the `fold` subject). */
const FOLDED = `
  CREATE OR REPLACE FUNCTION probe_append_owned(
    p_session text, p_bodies text[], p_texts text[], p_max bigint, p_keep_summarized boolean,
    p_fence bigint, p_holder text, p_release boolean, p_lang regconfig, p_owner text, p_since bigint,
    OUT out_status text, OUT out_first_seq bigint, OUT out_created_at bigint, OUT out_waiting bigint
  ) LANGUAGE plpgsql VOLATILE AS $fn$
  DECLARE
    v_n bigint := coalesce(cardinality(p_bodies), 0);
    v_now bigint;
    v_last bigint;
    v_upto bigint;
  BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended(p_session, 0));
    v_now := threadkeep_now_ms();
    UPDATE sessions s SET last_seq = s.last_seq + v_n, last_activity_at = v_now
      WHERE s.id = p_session AND (p_owner IS NULL OR (s.user_id = p_owner AND s.last_activity_at >= p_since))
      RETURNING s.last_seq INTO v_last;
    IF NOT FOUND THEN
      out_status := 'not_found';
      RETURN;
    END IF;
    INSERT INTO messages (session_id, seq, created_at, body, search_text, tsv)
      SELECT p_session, v_last - v_n + u.ord, v_now, u.body, u.txt, to_tsvector(p_lang, left(u.txt, 100000))
      FROM unnest(p_bodies, p_texts) WITH ORDINALITY AS u(body, txt, ord)
      WHERE p_max IS NULL OR p_keep_summarized OR v_last - v_n + u.ord > v_last - p_max;
    IF p_max IS NOT NULL AND v_last - p_max >= 1 THEN
      v_upto := v_last - p_max;
      IF v_upto >= 1 THEN
        DELETE FROM messages m WHERE m.session_id = p_session AND m.seq <= v_upto;
      END IF;
    END IF;
    out_status := 'ok';
    out_first_seq := v_last - v_n + 1;
    out_created_at := v_now;
  END
  $fn$`;
/** `probe_append_owned` with one message inserted by VALUES (the `fold2` subject). */
const FOLDED2 = `
  CREATE OR REPLACE FUNCTION probe_append_owned2(
    p_session text, p_bodies text[], p_texts text[], p_max bigint, p_keep_summarized boolean,
    p_fence bigint, p_holder text, p_release boolean, p_lang regconfig, p_owner text, p_since bigint,
    OUT out_status text, OUT out_first_seq bigint, OUT out_created_at bigint, OUT out_waiting bigint
  ) LANGUAGE plpgsql VOLATILE AS $fn$
  DECLARE
    v_n bigint := coalesce(cardinality(p_bodies), 0);
    v_now bigint;
    v_last bigint;
    v_upto bigint;
  BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended(p_session, 0));
    v_now := threadkeep_now_ms();
    UPDATE sessions s SET last_seq = s.last_seq + v_n, last_activity_at = v_now
      WHERE s.id = p_session AND (p_owner IS NULL OR (s.user_id = p_owner AND s.last_activity_at >= p_since))
      RETURNING s.last_seq INTO v_last;
    IF NOT FOUND THEN
      out_status := 'not_found';
      RETURN;
    END IF;
    IF v_n = 1 THEN
      IF p_max IS NULL OR p_keep_summarized OR p_max > 0 THEN
        INSERT INTO messages (session_id, seq, created_at, body, search_text, tsv)
          VALUES (p_session, v_last, v_now, p_bodies[1], p_texts[1], to_tsvector(p_lang, left(p_texts[1], 100000)));
      END IF;
    ELSE
    INSERT INTO messages (session_id, seq, created_at, body, search_text, tsv)
      SELECT p_session, v_last - v_n + u.ord, v_now, u.body, u.txt, to_tsvector(p_lang, left(u.txt, 100000))
      FROM unnest(p_bodies, p_texts) WITH ORDINALITY AS u(body, txt, ord)
      WHERE p_max IS NULL OR p_keep_summarized OR v_last - v_n + u.ord > v_last - p_max;
    END IF;
    IF p_max IS NOT NULL AND v_last - p_max >= 1 THEN
      v_upto := v_last - p_max;
      IF v_upto >= 1 THEN
        DELETE FROM messages m WHERE m.session_id = p_session AND m.seq <= v_upto;
      END IF;
    END IF;
    out_status := 'ok';
    out_first_seq := v_last - v_n + 1;
    out_created_at := v_now;
  END
  $fn$`;
/** `probe_append_owned2` computing no tsvector argument when none is asked for (the `fold3` subject). */
const FOLDED3 = `
  CREATE OR REPLACE FUNCTION probe_append_owned3(
    p_session text, p_bodies text[], p_texts text[], p_max bigint, p_keep_summarized boolean,
    p_fence bigint, p_holder text, p_release boolean, p_lang regconfig, p_owner text, p_since bigint,
    OUT out_status text, OUT out_first_seq bigint, OUT out_created_at bigint, OUT out_waiting bigint
  ) LANGUAGE plpgsql VOLATILE AS $fn$
  DECLARE
    v_n bigint := coalesce(cardinality(p_bodies), 0);
    v_now bigint;
    v_last bigint;
    v_upto bigint;
  BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended(p_session, 0));
    v_now := threadkeep_now_ms();
    UPDATE sessions s SET last_seq = s.last_seq + v_n, last_activity_at = v_now
      WHERE s.id = p_session AND (p_owner IS NULL OR (s.user_id = p_owner AND s.last_activity_at >= p_since))
      RETURNING s.last_seq INTO v_last;
    IF NOT FOUND THEN
      out_status := 'not_found';
      RETURN;
    END IF;
    IF v_n = 1 THEN
      IF p_max IS NULL OR p_keep_summarized OR p_max > 0 THEN
        INSERT INTO messages (session_id, seq, created_at, body, search_text, tsv)
          VALUES (p_session, v_last, v_now, p_bodies[1], p_texts[1], CASE WHEN p_lang IS NOT NULL THEN to_tsvector(p_lang, left(p_texts[1], 100000)) END);
      END IF;
    ELSE
    INSERT INTO messages (session_id, seq, created_at, body, search_text, tsv)
      SELECT p_session, v_last - v_n + u.ord, v_now, u.body, u.txt, to_tsvector(p_lang, left(u.txt, 100000))
      FROM unnest(p_bodies, p_texts) WITH ORDINALITY AS u(body, txt, ord)
      WHERE p_max IS NULL OR p_keep_summarized OR v_last - v_n + u.ord > v_last - p_max;
    END IF;
    IF p_max IS NOT NULL AND v_last - p_max >= 1 THEN
      v_upto := v_last - p_max;
      IF v_upto >= 1 THEN
        DELETE FROM messages m WHERE m.session_id = p_session AND m.seq <= v_upto;
      END IF;
    END IF;
    out_status := 'ok';
    out_first_seq := v_last - v_n + 1;
    out_created_at := v_now;
  END
  $fn$`;

/** The folded append for one message, with scalar arguments instead of arrays (the `one` subject). */
const ONE = `
  CREATE OR REPLACE FUNCTION probe_append_one(
    p_session text, p_body text, p_text text, p_max bigint, p_owner text, p_since bigint,
    OUT out_status text, OUT out_first_seq bigint, OUT out_created_at bigint, OUT out_waiting bigint
  ) LANGUAGE plpgsql VOLATILE AS $fn$
  DECLARE
    v_now bigint;
    v_last bigint;
  BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended(p_session, 0));
    v_now := threadkeep_now_ms();
    UPDATE sessions s SET last_seq = s.last_seq + 1, last_activity_at = v_now
      WHERE s.id = p_session AND (p_owner IS NULL OR (s.user_id = p_owner AND s.last_activity_at >= p_since))
      RETURNING s.last_seq INTO v_last;
    IF NOT FOUND THEN
      out_status := 'not_found';
      RETURN;
    END IF;
    INSERT INTO messages (session_id, seq, created_at, body, search_text) VALUES (p_session, v_last, v_now, p_body, p_text);
    IF p_max IS NOT NULL AND v_last - p_max >= 1 THEN
      DELETE FROM messages m WHERE m.session_id = p_session AND m.seq <= v_last - p_max;
    END IF;
    out_status := 'ok';
    out_first_seq := v_last;
    out_created_at := v_now;
  END
  $fn$`;

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
  await admin.unsafe(`SET search_path = "${SCHEMA}"`);
  await admin.unsafe(FOLDED);
  await admin.unsafe(ONE);
  await admin.unsafe(FOLDED2);
  await admin.unsafe(FOLDED3);
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
    fold: {
      app: "probe_stmt",
      read: (id) => subjects.stmtown.read(id),
      append: async (id, m) => {
        const bodies = [bodyOf(m)];
        const texts = [searchable(messageText(m))];
        const [row] = await rawT<{ out_status: string; out_first_seq: number; out_created_at: number }[]>`
          SELECT out_status, out_first_seq, out_created_at, out_waiting FROM probe_append_owned(
            ${id}, ${bodies}::text[], ${texts}::text[], ${200}::bigint, ${false},
            ${null}::bigint, ${null}::text, ${false}, ${null}::regconfig, ${owner(id)}::text, ${Number.MIN_SAFE_INTEGER}::bigint)`;
        return toMessage({ body: bodies[0], seq: row.out_first_seq, created_at: row.out_created_at });
      },
    },
    nofrag: {
      app: "probe_stmt",
      read: (id) => subjects.stmtown.read(id),
      append: async (id, m) => {
        const bodies = [bodyOf(m)];
        const texts = [searchable(messageText(m))];
        const [row] = await rawT<{ out_status: string; out_first_seq: number; out_created_at: number }[]>`
          SELECT out_status, out_first_seq, out_created_at, out_waiting FROM threadkeep_append_fenced(
            ${id}, ${bodies}::text[], ${texts}::text[], ${200}::bigint, ${false},
            ${null}::bigint, ${null}::text, ${false}, ${null}::regconfig)
          WHERE EXISTS (SELECT 1 FROM sessions WHERE id = ${id} AND user_id = ${owner(id)} AND last_activity_at >= ${Number.MIN_SAFE_INTEGER})`;
        return toMessage({ body: bodies[0], seq: row.out_first_seq, created_at: row.out_created_at });
      },
    },
    sqlform: {
      app: "probe_stmt",
      read: (id) => subjects.stmtown.read(id),
      append: async (id, m) => {
        const bodies = [bodyOf(m)];
        const texts = [searchable(messageText(m))];
        // Not correct under concurrency (the cap's DELETE reads the statement's snapshot): only what it costs.
        const [row] = await rawT<{ out_first_seq: number; out_created_at: number }[]>`
          WITH l AS (SELECT pg_advisory_xact_lock(hashtextextended(${id}, 0)) AS x, threadkeep_now_ms() AS now),
          u AS (UPDATE sessions s SET last_seq = s.last_seq + 1, last_activity_at = l.now FROM l
                WHERE s.id = ${id} AND s.user_id = ${owner(id)} AND s.last_activity_at >= ${Number.MIN_SAFE_INTEGER}
                RETURNING s.last_seq, l.now),
          i AS (INSERT INTO messages (session_id, seq, created_at, body, search_text)
                SELECT ${id}, u.last_seq, u.now, ${bodies[0]}, ${texts[0]} FROM u),
          d AS (DELETE FROM messages m USING u WHERE u.last_seq > ${200} AND m.session_id = ${id} AND m.seq <= u.last_seq - ${200})
          SELECT last_seq AS out_first_seq, now AS out_created_at FROM u`;
        return toMessage({ body: bodies[0], seq: row.out_first_seq, created_at: row.out_created_at });
      },
    },
    one: {
      app: "probe_stmt",
      read: (id) => subjects.stmtown.read(id),
      append: async (id, m) => {
        const body = bodyOf(m);
        const [row] = await rawT<{ out_status: string; out_first_seq: number; out_created_at: number }[]>`
          SELECT out_status, out_first_seq, out_created_at, out_waiting FROM probe_append_one(
            ${id}, ${body}::text, ${searchable(messageText(m))}::text, ${200}::bigint, ${owner(id)}::text, ${Number.MIN_SAFE_INTEGER}::bigint)`;
        return toMessage({ body, seq: row.out_first_seq, created_at: row.out_created_at });
      },
    },
    fold2: {
      app: "probe_stmt",
      read: (id) => subjects.stmtown.read(id),
      append: async (id, m) => {
        const bodies = [bodyOf(m)];
        const texts = [searchable(messageText(m))];
        const [row] = await rawT<{ out_status: string; out_first_seq: number; out_created_at: number }[]>`
          SELECT out_status, out_first_seq, out_created_at, out_waiting FROM probe_append_owned2(
            ${id}, ${bodies}::text[], ${texts}::text[], ${200}::bigint, ${false},
            ${null}::bigint, ${null}::text, ${false}, ${null}::regconfig, ${owner(id)}::text, ${Number.MIN_SAFE_INTEGER}::bigint)`;
        return toMessage({ body: bodies[0], seq: row.out_first_seq, created_at: row.out_created_at });
      },
    },
    fold3: {
      app: "probe_stmt",
      read: (id) => subjects.stmtown.read(id),
      append: async (id, m) => {
        const bodies = [bodyOf(m)];
        const texts = [searchable(messageText(m))];
        const [row] = await rawT<{ out_status: string; out_first_seq: number; out_created_at: number }[]>`
          SELECT out_status, out_first_seq, out_created_at, out_waiting FROM probe_append_owned3(
            ${id}, ${bodies}::text[], ${texts}::text[], ${200}::bigint, ${false},
            ${null}::bigint, ${null}::text, ${false}, ${null}::regconfig, ${owner(id)}::text, ${Number.MIN_SAFE_INTEGER}::bigint)`;
        return toMessage({ body: bodies[0], seq: row.out_first_seq, created_at: row.out_created_at });
      },
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
