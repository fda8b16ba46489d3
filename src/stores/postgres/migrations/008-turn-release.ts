/** PostgreSQL schema version 8 (the statement that calls it: {@link releaseWithWrite} in `postgres/_turn.ts`). */
import type { PgTx } from "../_client.js";

/**
 * Schema version 8: `threadkeep_release_written`, the release half of a combined turn commit. It gives
 * back the lease of `p_fence` (never a lease granted since) and returns how many live tickets wait for
 * the session (null when nothing was released), counted in a statement of its own: its snapshot is
 * taken after the UPDATE holds the lease row, so a waiter whose attempt held the row first (and joined
 * the line in that attempt) is counted. A waiter that comes after the row lock waits for this
 * transaction and then finds the lease free.
 *
 * No NOTIFY here: a transaction that notifies holds one cluster-wide lock from its commit until the
 * commit is flushed, so a NOTIFY in this durable transaction would put every session's commit in one
 * line behind the WAL flush (measured: 100 sessions at once fell from ~500 to ~150 turns/s). The
 * store notifies in a separate, asynchronously committed statement, and only when other processes wait.
 */
export async function migrateTurnRelease(tx: PgTx): Promise<void> {
  await tx.unsafe(`
    CREATE FUNCTION threadkeep_release_written(p_session text, p_fence bigint) RETURNS bigint
    LANGUAGE plpgsql VOLATILE AS $fn$
    DECLARE
      v_waiting bigint;
    BEGIN
      UPDATE leases l SET expires_at = 0 WHERE l.session_id = p_session AND l.fence = p_fence AND l.expires_at > 0;
      IF NOT FOUND THEN
        RETURN NULL;
      END IF;
      SELECT count(*) INTO v_waiting FROM lease_queue q
        WHERE q.session_id = p_session AND q.alive_until > threadkeep_now_ms();
      RETURN v_waiting;
    END
    $fn$`);
}
