/**
 * The PostgreSQL store's summary-bounded cap (`keepUnsummarized`): `threadkeep_cap_summarized`, run by
 * the write's own statement after the write function (as {@link capWithWrite}), so it applies in the
 * write's transaction while the write holds the session row: no other write, delete or re-creation of
 * the session comes between the write and the cap. Being a VOLATILE PL/pgSQL function, it reads
 * with a fresh snapshot, after the write, and sees every summary committed before it. The function is
 * made by `migrations/009-summary-cap.ts` and redefined by `migrations/012-deferred-indexing.ts`.
 */
import type { PgSql } from "./_client.js";

/**
 * The column a write statement adds (over the write's `w` with `out_status`) to apply a cap of
 * `maxMessages` bounded by the summaries, only when the write applied. The write function then gets
 * no cap of its own (it would drop regardless of summaries).
 */
export const capWithWrite = (sql: PgSql, sessionId: string, maxMessages: number) => sql`,
  CASE WHEN w.out_status = 'ok' THEN threadkeep_cap_summarized(${sessionId}, ${maxMessages}::bigint) END AS capped`;

/**
 * The ceiling of a write bounded by the summaries (`hardCap`): `threadkeep_cap_hard` in the select
 * list, after the write (its own snapshot sees the rows just written), only when the write applied.
 * Nothing when there is no ceiling.
 */
export const hardCapWithWrite = (sql: PgSql, sessionId: string, hardCap: number | undefined) =>
  hardCap && hardCap > 0
    ? sql`, CASE WHEN out_status = 'ok' THEN threadkeep_cap_hard(${sessionId}, ${Math.floor(hardCap)}::bigint) END AS hard_capped`
    : sql``;
