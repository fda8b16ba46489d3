/**
 * Schema version 11: `threadkeep_append` without the cap's DELETE when the cap cannot drop anything.
 * Seqs start at 1, so while the session's last seq is at most the cap no message lies below it; the
 * DELETE found nothing there, yet its executor start-up (an index probe and the foreign-key cascade
 * triggers of `message_vectors`) is work for nothing on every append to a session under its cap
 * (docs/decisions/0002-postgres-schema.md). Same signature, so the
 * functions that call it (`threadkeep_append_queued`, `_held`, `threadkeep_write`) use it unchanged;
 * everything else is the version 1 function.
 */
import type { PgTx } from "../_client.js";

/** Replaces `threadkeep_append` (schema version 11). */
export async function migrateAppendCapGuard(tx: PgTx): Promise<void> {
  await tx`
    CREATE OR REPLACE FUNCTION threadkeep_append(
      p_session text, p_bodies text[], p_texts text[], p_max bigint, p_fence bigint, p_lang regconfig
    ) RETURNS TABLE (out_status text, out_first_seq bigint, out_created_at bigint)
    LANGUAGE plpgsql VOLATILE AS $fn$
    DECLARE
      v_n bigint := coalesce(cardinality(p_bodies), 0);
      v_now bigint := threadkeep_now_ms();
      v_last bigint;
      v_fence bigint;
    BEGIN
      IF p_fence IS NOT NULL THEN
        -- FOR SHARE makes a grant of a newer lease wait for this append, so no turn starts on a
        -- history that a stale holder is still writing to.
        SELECT l.fence INTO v_fence FROM leases l WHERE l.session_id = p_session FOR SHARE;
        IF v_fence > p_fence THEN
          RETURN QUERY SELECT 'lease_expired'::text, NULL::bigint, NULL::bigint;
          RETURN;
        END IF;
      END IF;
      UPDATE sessions s SET last_seq = s.last_seq + v_n, last_activity_at = v_now
        WHERE s.id = p_session RETURNING s.last_seq INTO v_last;
      IF NOT FOUND THEN
        RETURN QUERY SELECT 'not_found'::text, NULL::bigint, NULL::bigint;
        RETURN;
      END IF;
      -- Rows the cap would drop at once are never written. Only the first 100,000 characters are
      -- indexed for full text: a tsvector is capped at 1 MB.
      INSERT INTO messages (session_id, seq, created_at, body, search_text, tsv)
        SELECT p_session, v_last - v_n + u.ord, v_now, u.body, u.txt,
               to_tsvector(p_lang, left(u.txt, 100000))
        FROM unnest(p_bodies, p_texts) WITH ORDINALITY AS u(body, txt, ord)
        WHERE p_max IS NULL OR v_last - v_n + u.ord > v_last - p_max;
      IF p_max IS NOT NULL AND v_last - p_max >= 1 THEN
        DELETE FROM messages m WHERE m.session_id = p_session AND m.seq <= v_last - p_max;
      END IF;
      RETURN QUERY SELECT 'ok'::text, v_last - v_n + 1, v_now;
    END
    $fn$`;
}
