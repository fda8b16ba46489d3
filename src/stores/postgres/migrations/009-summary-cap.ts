/** PostgreSQL schema version 9 (the statement that calls it: `capWithWrite` in `postgres/_cap.ts`). */
import type { PgTx } from "../_client.js";

/**
 * Schema version 9: `threadkeep_cap_summarized(session, max)` drops the messages older than the
 * newest `max` seqs (the seq bound the append's own cap uses), but none past the furthest seq the
 * session's summaries reach. Returns how many it dropped.
 */
export async function migrateSummaryCap(tx: PgTx): Promise<void> {
  await tx.unsafe(`
    CREATE FUNCTION threadkeep_cap_summarized(p_session text, p_max bigint) RETURNS bigint
    LANGUAGE plpgsql VOLATILE AS $fn$
    DECLARE
      v_upto bigint;
      v_dropped bigint;
    BEGIN
      SELECT least(s.last_seq - p_max, (SELECT coalesce(max(m.to_seq), 0) FROM summaries m WHERE m.session_id = p_session))
        INTO v_upto FROM sessions s WHERE s.id = p_session;
      IF v_upto IS NULL OR v_upto < 1 THEN
        RETURN 0;
      END IF;
      DELETE FROM messages m WHERE m.session_id = p_session AND m.seq <= v_upto;
      GET DIAGNOSTICS v_dropped = ROW_COUNT;
      RETURN v_dropped;
    END
    $fn$`);
}
