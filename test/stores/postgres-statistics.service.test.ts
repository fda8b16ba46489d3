/**
 * The PostgreSQL store's statistics keeper (`src/stores/postgres/_statistics.ts`) on a server of this
 * file's own, whose autovacuum is on (initdb's default; the shared test server runs with it off, so
 * the keeper's "autovacuum is on: only ask" side can only be seen here):
 *
 * - a table with `autovacuum_enabled = false` is analyzed by the keeper once it changed by more than
 *   autovacuum's analyze threshold; a table autovacuum looks after is left to autovacuum, however
 *   much it changed;
 * - while another process of the schema holds the keeper's advisory lock, nothing is analyzed; once
 *   it is let go, the waiting tables are.
 *
 * The keeper's effect on plans is tested in `postgres-turn-plans.service.test.ts`.
 */
import { randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import postgres from "postgres";
import { afterAll, describe, expect, it } from "vitest";
import { createPostgresStore } from "../../src/stores/postgres/index.js";
import { type PostgresPair, standbyAvailable, startPostgresPair } from "../_postgres-standby.js";
import { until } from "../_wait.js";

/** The keeper's advisory lock class (`LOCK_CLASS` in `_statistics.ts`: "tkan"); its key is the schema's hash. */
const LOCK_CLASS = 0x74_6b_61_6e;
const INTERVAL_MS = 100;
/** Sessions (and 2 messages each) added: past autovacuum's analyze threshold of 50 rows on a new table. */
const GROWTH = 120;

const enabled = standbyAvailable("the PostgreSQL statistics keeper test (a server with autovacuum on)");
const pair: PostgresPair | undefined = enabled === true ? await startPostgresPair() : undefined;
afterAll(async () => {
  await pair?.stop();
});

/** Manual `ANALYZE`s and changes since the last analyze, of `table` in `schema` (autovacuum's own are counted apart). */
async function tableStats(admin: postgres.Sql, schema: string, table: string) {
  const [row] = await admin<{ analyzed: number; changed: number }[]>`
    SELECT analyze_count::int AS analyzed, n_mod_since_analyze::int AS changed
    FROM pg_stat_user_tables WHERE schemaname = ${schema} AND relname = ${table}`;
  return row;
}

describe("the PostgreSQL store's statistics keeper on a server with autovacuum on", { timeout: 60_000 }, () => {
  it("analyzes only the tables whose autovacuum is off, and only while no other process of the schema holds its lock", async (ctx) => {
    if (enabled !== true) return ctx.skip(enabled);
    const admin = postgres(pair!.primaryUrl, { max: 1, onnotice: () => {} });
    const holder = postgres(pair!.primaryUrl, { max: 1, onnotice: () => {} });
    const schema = `tk_stats_${randomBytes(4).toString("hex")}`;
    const store = createPostgresStore({ url: pair!.primaryUrl, schema, statisticsIntervalMs: INTERVAL_MS });
    try {
      const [{ autovacuum }] = await admin<
        { autovacuum: string }[]
      >`SELECT current_setting('autovacuum') AS autovacuum`;
      expect(autovacuum).toBe("on");
      await store.createSession({ id: "first", userId: "u" }); // migrates, and starts the keeper
      await admin.unsafe(`ALTER TABLE "${schema}".sessions SET (autovacuum_enabled = false)`);
      // Another process of the schema is analyzing: the keeper must not start one of its own.
      await holder`SELECT pg_advisory_lock(${LOCK_CLASS}, hashtext(${schema}))`;

      // The growth comes through a store of its own, closed afterwards: a backend flushes its table
      // statistics as it exits, and the keeper reads them from pg_stat_user_tables.
      const loader = createPostgresStore({ url: pair!.primaryUrl, schema, statisticsIntervalMs: false });
      try {
        for (let i = 0; i < GROWTH; i++) {
          await loader.createSession({ id: `grown-${i}`, userId: "u" });
          await loader.appendMessages(`grown-${i}`, [
            { role: "user", content: `question ${i}` },
            { role: "assistant", content: `answer ${i}` },
          ]);
        }
      } finally {
        await loader.close();
      }
      await until("the load's statistics are flushed", async () => {
        const [sessions, messages] = [
          await tableStats(admin, schema, "sessions"),
          await tableStats(admin, schema, "messages"),
        ];
        return sessions.changed >= GROWTH && messages.changed >= 2 * GROWTH;
      });

      // Ten of the keeper's intervals with the lock held elsewhere: nothing analyzed.
      await sleep(10 * INTERVAL_MS);
      expect((await tableStats(admin, schema, "sessions")).analyzed).toBe(0);

      await holder`SELECT pg_advisory_unlock(${LOCK_CLASS}, hashtext(${schema}))`;
      await until("the keeper analyzes the table whose autovacuum is off", async () => {
        return (await tableStats(admin, schema, "sessions")).analyzed >= 1;
      });
      // The check that found `sessions` stale saw `messages` changed as much: autovacuum's to analyze.
      const messages = await tableStats(admin, schema, "messages");
      expect(messages.analyzed).toBe(0);
      expect(messages.changed).toBeGreaterThanOrEqual(2 * GROWTH);
      // And nothing more of the keeper's for `sessions` until it changes again.
      await sleep(5 * INTERVAL_MS);
      expect((await tableStats(admin, schema, "sessions")).analyzed).toBe(1);
    } finally {
      await store.close();
      await admin.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => {});
      await Promise.all([admin.end(), holder.end()]);
    }
  });
});
