/** PostgreSQL schema version 2, as released: never edited, not even its indentation; a change is a new version. */
import type { PgTx } from "../_client.js";

/** Schema version 2: `threadkeep_append_queued`, appends queued in arrival order. */
export async function migrateAppendQueue(tx: PgTx): Promise<void> {
  // Appends to one session first queue on an advisory lock, which PostgreSQL grants strictly in
  // arrival order, then take the row lock uncontended. Without the queue, every waiter on the row
  // lock wakes when it frees and they race for it: under 50 concurrent writers on one session this
  // halved throughput and stretched p99 several-fold (docs/decisions/0002-postgres-schema.md).
  await tx`
        CREATE FUNCTION threadkeep_append_queued(
          p_session text, p_bodies text[], p_texts text[], p_max bigint, p_fence bigint, p_lang regconfig
        ) RETURNS TABLE (out_status text, out_first_seq bigint, out_created_at bigint)
        LANGUAGE plpgsql VOLATILE AS $fn$
        BEGIN
          PERFORM pg_advisory_xact_lock(hashtextextended(p_session, 0));
          RETURN QUERY SELECT * FROM threadkeep_append(p_session, p_bodies, p_texts, p_max, p_fence, p_lang);
        END
        $fn$`;
}
