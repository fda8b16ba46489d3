/**
 * PostgreSQL schema version 22: the functions of a turn and of the background full-text drain plan
 * their statements with sequential scans off, so a plan cached while the tables were small never
 * reads a grown table whole (issue 34).
 *
 * Why: PostgreSQL caches the plan of each statement of a PL/pgSQL function (and of each foreign-key
 * check it fires) per connection, and re-plans only when a table's statistics change. Statistics
 * taken while the tables were nearly empty (a `VACUUM ANALYZE` after deploying, or a scheduled one on
 * a server with autovacuum off) cost a whole scan of `sessions`, `leases`, `summaries` or
 * `session_state` as cheaper than an index probe; as the tables grow the cached plan stays, and every
 * turn reads every one of those tables whole (on 20,000 sessions, 20 turns read 400,000–820,000 rows
 * of each: `test/stores/postgres-turn-plans.service.test.ts`). Every statement of these functions finds its rows
 * by key (a session's id, its seq range, the pending rows' partial index), so with sequential scans off
 * the planner takes the index whatever the statistics say; a table with no index for a statement is
 * still scanned, since that is then the only plan. The setting holds only while the function runs.
 *
 * Functions left as they were: `threadkeep_recount_terms` (a full recount, meant to read everything)
 * and the trigger functions (they run under the setting of the statement that fires them: the
 * appends' inside these functions). A foreign-key check's plan is cached per connection the first
 * time it runs: where that is a client-side write (an import's insert into `messages`, before any
 * append on that connection), the appends reuse the plan made without the setting.
 */
import type { PgTx } from "../_client.js";

/** The keyed functions: the turn's read, the appends and writes with their lease checks, the caps, the drain. */
export const KEYED_FUNCTIONS = [
  "threadkeep_turn_read",
  "threadkeep_turn_doc",
  "threadkeep_append_held",
  "threadkeep_write_held",
  "threadkeep_append_fenced",
  "threadkeep_append_scoped",
  "threadkeep_lease_refused",
  "threadkeep_release_written",
  "threadkeep_cap_summarized",
  "threadkeep_cap_hard",
  "threadkeep_index_pending",
] as const;

/** Schema version 22: the keyed functions run with `enable_seqscan` off. */
export async function migrateKeyedTurns(tx: PgTx): Promise<void> {
  const functions = await tx<{ fn: string }[]>`
    SELECT p.oid::regprocedure::text AS fn FROM pg_proc p
    WHERE p.pronamespace = current_schema()::regnamespace AND p.proname = ANY(${[...KEYED_FUNCTIONS]}::text[])`;
  for (const { fn } of functions) await tx.unsafe(`ALTER FUNCTION ${fn} SET enable_seqscan = off`);
}
