/**
 * A turn's cost on PostgreSQL does not grow with the database (issue 34): no statement of the proxy's
 * turn — the lease and read in one, the fenced append that gives the lease back — nor a library's
 * owner-scoped append or the background full-text drain reads one of the store's tables whole, however
 * small the tables were when the connection's plans were made.
 *
 * Why it could: PostgreSQL caches a plan for a prepared statement, and for each statement of a
 * PL/pgSQL function, per connection; after five runs it may keep a generic plan, costed with the
 * statistics of that moment, and keeps it until the table's statistics change (an `ANALYZE`). A
 * table whose statistics were taken while it was nearly empty (a `VACUUM ANALYZE` right after
 * deploying; `leases` before sessions had turns) is planned as a sequential scan, and with autovacuum
 * off nothing takes them again: every turn then reads the whole table (on the `postgres-concurrency`
 * bench, 1,425 `leases` rows a scan, two scans a turn: docs/benchmarks.md). Schema version 22 keeps the turn's functions on their
 * indexes (`migrations/022-keyed-turns.ts`).
 *
 * The store's own single statements (the owner-scoped window read of `getMessages`, the state and
 * summary writes' foreign-key checks) are planned by PostgreSQL from the same statistics, and read
 * whole tables in that case (2.8 million `sessions` rows in the second test's 20 rounds, without the
 * store's `ANALYZE`); their cure is statistics that follow the tables: autovacuum, PostgreSQL's
 * default, or while it is off the store's own `ANALYZE` of the tables that grew (`postgres/_statistics.ts`).
 *
 * How it is counted: the store's connections carry an `application_name` of their own; once the
 * store is closed and they are gone (a backend flushes its statistics as it exits, before it leaves
 * `pg_stat_activity`), `pg_stat_user_tables` tells how many rows sequential scans read in each table
 * of the test's schema. Unflushed statistics would read as no scan at all, so the test also waits
 * for the lease updates only the store's backends make.
 */
import { randomBytes } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import postgres from "postgres";
import type { FullStore } from "../../src/core/types.js";
import type { PostgresStoreOptions } from "../../src/stores/postgres/index.js";
import { serviceAvailable, TEST_POSTGRES_URL } from "../_services.js";
import { until } from "../_wait.js";
import { KEYED_FUNCTIONS } from "../../src/stores/postgres/migrations/022-keyed-turns.js";
import { vectorIndexStore } from "./_postgres-vectors.js";

/** Rows each table holds before the counted turns: a whole scan of any of them reads at least this many. */
const ROWS = 20_000;
/** The tables a turn touches. */
const TABLES = ["sessions", "messages", "summaries", "session_state", "leases", "lease_queue"];

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** One proxied turn (as the server takes it: `openTurn`, then the fenced append releasing the lease) and a library append. */
async function turns(store: FullStore, id: string, userId: string, i: number): Promise<void> {
  const owner = { userId };
  const opened = await store.openTurn!(id, { owner, last: 20 });
  expect(opened.status).toBe("ok");
  const appended = await store.appendMessages(
    id,
    [
      { role: "user", content: `question ${i}` },
      { role: "assistant", content: `answer ${i}` },
    ],
    { fence: opened.lease.fence, owner, releaseLease: true, maxMessages: 200, keepUnsummarized: true },
  );
  expect(appended).toHaveLength(2);
  await store.appendMessages(id, [{ role: "user", content: `note ${i}` }], { owner, maxMessages: 200 });
}

/** The store's single statements by key, as the API and the server run them between turns. */
async function reads(store: FullStore, id: string, userId: string, i: number): Promise<void> {
  const owner = { userId };
  expect((await store.getMessages(id, { last: 20, owner })).length).toBeGreaterThan(0);
  expect((await store.getSession(id))?.userId).toBe(userId);
  expect((await store.listSessions(userId, { limit: 20 })).sessions.length).toBeGreaterThan(0);
  expect(await store.countMessages(id)).toBeGreaterThan(0);
  const state = await store.getState(id);
  await store.setState(id, { i }, state.version);
  await store.saveSummary(id, { fromSeq: 1, toSeq: 1, content: `summary ${i}` });
  expect((await store.listSummaries(id)).length).toBeGreaterThan(0);
  await store.updateSessionMetadata(id, { i });
}

/**
 * Rows read by sequential scans, per table, during `counted` rounds of `calls` on each of two
 * sessions, run after {@link ROWS} other owners' sessions (each with a message, a summary, a state and
 * a lease) were added under plans the store's connections made while the tables were nearly empty.
 * `grown` runs after the load, before the counted rounds.
 */
async function scansAfterGrowth(
  options: Partial<PostgresStoreOptions>,
  calls: (store: FullStore, id: string, userId: string, i: number) => Promise<void>,
  grown: (admin: postgres.Sql, schema: string) => Promise<void> = async () => {},
): Promise<Record<string, number>> {
  const tag = randomBytes(4).toString("hex");
  const schema = `tk_plans_${tag}`;
  const application = `tk-plans-${tag}`;
  const url = new URL(TEST_POSTGRES_URL);
  url.searchParams.set("application_name", application);
  // Two connections, and the calls one after another: the counted turns run on the connections that
  // planned their statements while the tables were nearly empty.
  const { store, admin, close } = vectorIndexStore({ url: url.toString(), schema, poolSize: 2, ...options });
  cleanups.push(close);
  const userId = "u";
  const ids = ["plans-a", "plans-b"];
  for (const id of ids) await store.createSession({ id, userId });
  await calls(store, ids[0], userId, -1);
  // Autovacuum stays off the test's tables whatever the server's setting, so their statistics change
  // only by an ANALYZE the test or the store runs.
  for (const table of TABLES) await admin.unsafe(`ALTER TABLE "${schema}".${table} SET (autovacuum_enabled = false)`);
  // Statistics taken while the tables are nearly empty, as a `VACUUM ANALYZE` after deploying (or a
  // scheduled one, with autovacuum off) takes them: plans made now cost a whole scan as cheap.
  await admin.unsafe(`VACUUM ANALYZE ${TABLES.map((t) => `"${schema}".${t}`).join(", ")}`);
  // Past PostgreSQL's five custom plans: from here each connection runs its cached plans.
  for (let i = 0; i < 8; i++) for (const id of ids) await calls(store, id, userId, i);

  // The database grows under the cached plans: other owners' sessions, each with a message, a
  // summary, a state and a lease. Loaded with triggers off (the full-text statistics of the load
  // would read `sessions` whole in their own statement, which is not a turn's); that takes a
  // superuser, as the test database's role is.
  await admin.begin(async (tx) => {
    await tx`SET LOCAL session_replication_role = replica`;
    await tx`
      INSERT INTO sessions (id, user_id, created_at, last_activity_at, last_seq, metadata, activity_floor)
      SELECT 'bulk-' || g, 'bulk', threadkeep_now_ms(), threadkeep_now_ms(), 1, '{}', threadkeep_now_ms()
      FROM generate_series(1, ${ROWS}) g`;
    await tx`
      INSERT INTO messages (session_id, seq, created_at, body, search_text, tsv)
      SELECT 'bulk-' || g, 1, threadkeep_now_ms(), '{"role":"user","content":"hi"}', 'hi', 'hi'::tsvector
      FROM generate_series(1, ${ROWS}) g`;
    await tx`
      INSERT INTO summaries (session_id, from_seq, to_seq, created_at, content)
      SELECT 'bulk-' || g, 1, 1, threadkeep_now_ms(), 'hi' FROM generate_series(1, ${ROWS}) g`;
    await tx`INSERT INTO session_state (session_id, version, data) SELECT 'bulk-' || g, 1, '{}' FROM generate_series(1, ${ROWS}) g`;
    await tx`
      INSERT INTO leases (session_id, fence, expires_at, holder)
      SELECT 'bulk-' || g, nextval('lease_fence'), 0, 'h' FROM generate_series(1, ${ROWS}) g`;
  });
  await grown(admin, schema);

  const counted = 10;
  for (let i = 0; i < counted; i++) for (const id of ids) await calls(store, id, userId, 100 + i);
  await store.close();
  await until(
    "the store's connections end",
    async () =>
      (await admin`SELECT 1 FROM pg_stat_activity WHERE application_name = ${application} AND pid <> pg_backend_pid()`)
        .length === 0,
  );
  // The grant and the release of each counted turn (both updates of an existing row; the admin's
  // load only inserted) are in the statistics: the store's backends have flushed.
  const leaseUpdates = 2 * counted * ids.length;
  let stats: { relname: string; seq_tup_read: number; n_tup_upd: number }[] = [];
  await until("the store's table statistics are flushed", async () => {
    stats = await admin`
      SELECT relname, seq_tup_read::int, n_tup_upd::int FROM pg_stat_user_tables WHERE schemaname = ${schema}`;
    const leases = stats.find((s) => s.relname === "leases");
    return leases !== undefined && leases.n_tup_upd >= leaseUpdates;
  });
  return Object.fromEntries(TABLES.map((t) => [t, stats.find((s) => s.relname === t)?.seq_tup_read ?? 0]));
}

describe("PostgreSQL turns on a grown database", () => {
  it(
    "read no table whole, whatever the tables held when the connection planned them",
    { timeout: 60_000 },
    async (ctx) => {
      const available = await serviceAvailable("postgres");
      if (available !== true) ctx.skip(available);
      // Schema 22's guarantee alone: no statistics are taken again while the turns run.
      const read = await scansAfterGrowth({ statisticsIntervalMs: false }, turns);
      // Before the load the tables held a few dozen rows at most; one whole scan after it reads ROWS.
      for (const table of TABLES) expect(read[table], `${table}: ${JSON.stringify(read)}`).toBeLessThan(ROWS / 4);
    },
  );

  it(
    "the store's reads and writes by key follow the tables too: with autovacuum off it analyzes the tables that grew",
    { timeout: 60_000 },
    async (ctx) => {
      const available = await serviceAvailable("postgres");
      if (available !== true) ctx.skip(available);
      const both = async (store: FullStore, id: string, userId: string, i: number) => {
        await turns(store, id, userId, i);
        await reads(store, id, userId, i);
      };
      const read = await scansAfterGrowth({ statisticsIntervalMs: 100 }, both, async (admin, schema) => {
        // The store's next check finds every table the load grew past autovacuum's threshold, and analyzes it.
        const [{ loaded }] = await admin<{ loaded: Date }[]>`SELECT now() AS loaded`;
        const grew = TABLES.filter((t) => t !== "lease_queue");
        await until("the store analyzes the tables that grew", async () => {
          const fresh = await admin<{ relname: string }[]>`
            SELECT relname FROM pg_stat_user_tables
            WHERE schemaname = ${schema} AND last_analyze > ${loaded} AND relname IN ${admin(grew)}`;
          return fresh.length === grew.length;
        });
      });
      for (const table of TABLES) expect(read[table], `${table}: ${JSON.stringify(read)}`).toBeLessThan(ROWS / 4);
    },
  );

  it("every keyed function of schema 22 exists and runs with sequential scans off", async (ctx) => {
    const available = await serviceAvailable("postgres");
    if (available !== true) ctx.skip(available);
    const schema = `tk_plans_${randomBytes(4).toString("hex")}`;
    const { store, admin, close } = vectorIndexStore({ url: TEST_POSTGRES_URL, schema });
    cleanups.push(close);
    await store.listSessions("u", { limit: 1 });
    const rows = await admin<{ name: string; config: string[] | null }[]>`
      SELECT proname AS name, proconfig AS config FROM pg_proc
      WHERE pronamespace = ${schema}::regnamespace AND proname IN ${admin([...KEYED_FUNCTIONS])}`;
    // A function renamed or dropped by a later version would otherwise be skipped without a word.
    expect(rows.map((r) => r.name).sort()).toEqual([...KEYED_FUNCTIONS].sort());
    for (const row of rows) expect(row.config, row.name).toContain("enable_seqscan=off");
  });
});
