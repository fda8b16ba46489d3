/**
 * Fenced writes on PostgreSQL check the holder as well as the fence (schema version 10).
 *
 * Why the fence alone is not enough: a grant made for a turn (`openTurn`) commits asynchronously, so
 * a turn costs one WAL flush (its write's) instead of two. A database crash can lose such a grant, and
 * with it the `lease_fence` sequence's advance: the lease row goes back to what it was, and the same
 * fence number can be handed to the next waiter. The holder that lost its grant still has its fence,
 * so a check by number alone would let both write. Each grant names its holder (a random token, the
 * `holder` column of `leases`), and a write that says whose it is applies only while the lease row
 * holds that very grant: the same fence *and* the same holder. A lost grant fails every write of its
 * holder (the row holds an older grant, or another holder's), whatever fence comes next.
 *
 * A grant that was not lost is durable by the time its turn's write is: WAL is one sequence, and the
 * write's durable commit flushes everything before it, the grant's commit record included. A write
 * without a holder (a fence this store instance did not grant, e.g. passed from another process) is
 * checked by fence number as before; that is safe for grants of `acquireLease`, which stay durable.
 */
import type { PgTx } from "../_client.js";

/**
 * Schema version 10: `threadkeep_lease_refused` (the rule, on the lease row held `FOR SHARE`) and the
 * two write functions that apply it, `threadkeep_append_held` and `threadkeep_write_held`. They wrap
 * the older functions, which stay as they were so that processes of the previous version keep working
 * during an upgrade (their grants are all durable, so their fence-only checks stay sound).
 */
export async function migrateHeldWrites(tx: PgTx): Promise<void> {
  // FOR SHARE makes a grant of a newer lease wait for the write, so no turn starts on a history that
  // a stale holder is still writing to. With a holder, a row that is missing, holds another fence or
  // another holder refuses; without one, only a newer fence refuses (the rule before version 10).
  await tx.unsafe(`
    CREATE FUNCTION threadkeep_lease_refused(p_session text, p_fence bigint, p_holder text) RETURNS boolean
    LANGUAGE plpgsql VOLATILE AS $fn$
    DECLARE
      v_fence bigint;
      v_holder text;
    BEGIN
      SELECT l.fence, l.holder INTO v_fence, v_holder FROM leases l WHERE l.session_id = p_session FOR SHARE;
      IF p_holder IS NULL THEN
        RETURN coalesce(v_fence > p_fence, false);
      END IF;
      RETURN v_fence IS DISTINCT FROM p_fence OR v_holder IS DISTINCT FROM p_holder;
    END
    $fn$`);
  // The append queues on the session's advisory lock as threadkeep_append_queued does, then checks.
  await tx.unsafe(`
    CREATE FUNCTION threadkeep_append_held(
      p_session text, p_bodies text[], p_texts text[], p_max bigint, p_fence bigint, p_holder text, p_lang regconfig
    ) RETURNS TABLE (out_status text, out_first_seq bigint, out_created_at bigint)
    LANGUAGE plpgsql VOLATILE AS $fn$
    BEGIN
      PERFORM pg_advisory_xact_lock(hashtextextended(p_session, 0));
      IF p_fence IS NOT NULL AND threadkeep_lease_refused(p_session, p_fence, p_holder) THEN
        RETURN QUERY SELECT 'lease_expired'::text, NULL::bigint, NULL::bigint;
        RETURN;
      END IF;
      RETURN QUERY SELECT * FROM threadkeep_append(p_session, p_bodies, p_texts, p_max, NULL, p_lang);
    END
    $fn$`);
  // An operation this session already applied is answered by threadkeep_write (replayed or a conflict)
  // before any lease check, as before: the retry of a write that applied and gave its lease back must
  // not fail because the lease moved on. Operations are only recorded under the advisory lock taken
  // here, so the lookup cannot race one being written.
  await tx.unsafe(`
    CREATE FUNCTION threadkeep_write_held(
      p_session text, p_after bigint, p_bodies text[], p_texts text[], p_max bigint, p_fence bigint, p_holder text,
      p_lang regconfig, p_op text, p_digest text, p_expected bigint, p_reason text, p_branch_meta text
    ) RETURNS TABLE (out_status text, out_first_seq bigint, out_last_seq bigint, out_created_at bigint)
    LANGUAGE plpgsql VOLATILE AS $fn$
    BEGIN
      PERFORM pg_advisory_xact_lock(hashtextextended(p_session, 0));
      IF p_fence IS NOT NULL AND p_holder IS NOT NULL
         AND NOT (p_op IS NOT NULL AND EXISTS (SELECT 1 FROM operations o WHERE o.session_id = p_session AND o.id = p_op))
         AND threadkeep_lease_refused(p_session, p_fence, p_holder) THEN
        RETURN QUERY SELECT 'lease_expired'::text, NULL::bigint, NULL::bigint, NULL::bigint;
        RETURN;
      END IF;
      RETURN QUERY SELECT * FROM threadkeep_write(p_session, p_after, p_bodies, p_texts, p_max, p_fence, p_lang,
        p_op, p_digest, p_expected, p_reason, p_branch_meta);
    END
    $fn$`);
}
