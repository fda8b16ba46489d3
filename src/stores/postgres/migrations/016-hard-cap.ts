/**
 * Schema version 16: `threadkeep_cap_hard(session, max)` keeps the newest `max` messages of a
 * session whatever its summaries reach: the ceiling (`AppendOptions.hardCap`) a write with
 * `keepUnsummarized` carries, so a summarizer that keeps failing cannot let a session grow without
 * bound. Run in the same statement as the write (after it), as `threadkeep_cap_summarized` is. Seqs
 * start at 1 and have gaps only where messages were removed, so `last_seq - max` bounds what to drop
 * as the append's own cap does.
 */
import type { PgTx } from "../_client.js";

/** Adds `threadkeep_cap_hard` (schema version 16). */
export async function migrateHardCap(tx: PgTx): Promise<void> {
  await tx.unsafe(`
    CREATE FUNCTION threadkeep_cap_hard(p_session text, p_max bigint) RETURNS bigint
    LANGUAGE plpgsql VOLATILE AS $fn$
    DECLARE
      v_last bigint;
      v_dropped bigint;
    BEGIN
      SELECT s.last_seq INTO v_last FROM sessions s WHERE s.id = p_session;
      IF v_last IS NULL OR v_last - p_max < 1 THEN
        RETURN 0;
      END IF;
      DELETE FROM messages m WHERE m.session_id = p_session AND m.seq <= v_last - p_max;
      GET DIAGNOSTICS v_dropped = ROW_COUNT;
      RETURN v_dropped;
    END
    $fn$`);
}
