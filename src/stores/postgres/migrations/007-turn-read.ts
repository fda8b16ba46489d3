/** PostgreSQL schema version 7 (why the turn's read is a function: `postgres/_turn.ts`). */
import type { PgTx } from "../_client.js";

/** Schema version 7: `threadkeep_turn_read`, the read half of a combined turn opening. */
export async function migrateTurnRead(tx: PgTx): Promise<void> {
  // One statement, so the session, window, summaries and state are one snapshot, taken after the
  // grant (see the file comment). Rows, not arrays: bodies travel as they are stored, parsed once.
  // Nothing of another owner's or an expired session is read.
  await tx.unsafe(`
    CREATE FUNCTION threadkeep_turn_read(p_fence bigint, p_session text, p_user text, p_since bigint, p_last bigint)
    RETURNS TABLE (
      o_kind text, o_status text, o_created_at bigint, o_last_activity_at bigint, o_metadata text,
      o_state_version integer, o_state_data text, o_seq bigint, o_body text,
      o_id bigint, o_from_seq bigint, o_to_seq bigint, o_content text
    ) LANGUAGE plpgsql VOLATILE AS $fn$
    BEGIN
      IF p_fence IS NULL THEN
        RETURN;
      END IF;
      RETURN QUERY
        WITH s AS (
          SELECT CASE WHEN x.id IS NULL THEN 'missing' WHEN x.user_id <> p_user THEN 'foreign'
                      WHEN x.last_activity_at < p_since THEN 'expired' ELSE 'ok' END AS status,
                 x.created_at, x.last_activity_at, x.metadata
          FROM (SELECT 1) one LEFT JOIN sessions x ON x.id = p_session
        )
        SELECT 'session'::text, s.status,
               CASE WHEN s.status = 'ok' THEN s.created_at END, CASE WHEN s.status = 'ok' THEN s.last_activity_at END,
               CASE WHEN s.status = 'ok' THEN s.metadata END, st.version, st.data,
               NULL::bigint, NULL::text, NULL::bigint, NULL::bigint, NULL::bigint, NULL::text
        FROM s LEFT JOIN session_state st ON st.session_id = p_session AND s.status = 'ok'
        UNION ALL
        SELECT 'message'::text, NULL::text, t.created_at, NULL::bigint, NULL::text, NULL::integer, NULL::text,
               t.seq, t.body, NULL::bigint, NULL::bigint, NULL::bigint, NULL::text
        FROM (
          SELECT mm.seq, mm.created_at, mm.body FROM s, messages mm
          WHERE s.status = 'ok' AND mm.session_id = p_session ORDER BY mm.seq DESC LIMIT p_last
        ) t
        UNION ALL
        SELECT 'summary'::text, NULL::text, x.created_at, NULL::bigint, x.metadata, NULL::integer, NULL::text,
               NULL::bigint, NULL::text, x.id, x.from_seq, x.to_seq, x.content
        FROM s, summaries x WHERE s.status = 'ok' AND x.session_id = p_session;
    END
    $fn$`);
}
