/** PostgreSQL schema version 14 (why the turn's read is a function: `postgres/_turn.ts`). */
import type { PgTx } from "../_client.js";

/**
 * Schema version 14: `threadkeep_turn_doc`, the read of version 7 as one JSON document in one column
 * of the granting statement's one row, instead of a row per message and summary of thirteen columns
 * (with the attempt's six repeated on each): the client decodes one value and parses it once, where it
 * decoded ~20 rows of ~19 columns and parsed each body apart (~90 µs of client CPU per turn, measured
 * with the same rows made by `generate_series`), and the server sends one row and fills no tuplestore.
 * The stored JSON (bodies, metadata, state) is spliced in as it is; summary content, plain text, is
 * quoted by `to_json`. `{"status": …}` alone for a session not read (missing, another owner's, expired).
 *
 * Why PL/pgSQL, and not SQL: a VOLATILE SQL scalar function may be inlined into the calling statement
 * and would then read with that statement's snapshot, taken before the grant (see the file comment);
 * a PL/pgSQL function is never inlined, and its statement takes a snapshot of its own when it runs,
 * which is after the grant holds the lease row: the function is called with the grant's fence.
 * Version 7's function stays for processes of the previous version during an upgrade.
 */
export async function migrateTurnDoc(tx: PgTx): Promise<void> {
  await tx.unsafe(`
    CREATE FUNCTION threadkeep_turn_doc(p_fence bigint, p_session text, p_user text, p_since bigint, p_last bigint)
    RETURNS text LANGUAGE plpgsql VOLATILE AS $fn$
    DECLARE
      v_doc text;
    BEGIN
      IF p_fence IS NULL THEN
        RETURN NULL;
      END IF;
      SELECT CASE
        WHEN x.id IS NULL THEN '{"status":"missing"}'
        WHEN x.user_id <> p_user THEN '{"status":"foreign"}'
        WHEN x.last_activity_at < p_since THEN '{"status":"expired"}'
        ELSE concat('{"status":"ok","createdAt":', x.created_at, ',"lastActivityAt":', x.last_activity_at,
          ',"metadata":', x.metadata,
          ',"state":', coalesce((SELECT concat('[', st.version, ',', st.data, ']') FROM session_state st WHERE st.session_id = p_session), 'null'),
          ',"messages":[', (
            SELECT string_agg(concat('[', t.seq, ',', t.created_at, ',', t.body, ']'), ',' ORDER BY t.seq)
            FROM (SELECT m.seq, m.created_at, m.body FROM messages m WHERE m.session_id = p_session ORDER BY m.seq DESC LIMIT p_last) t),
          '],"summaries":[', (
            SELECT string_agg(concat('[', u.id, ',', u.from_seq, ',', u.to_seq, ',', u.created_at, ',', to_json(u.content)::text, ',', coalesce(u.metadata, 'null'), ']'), ','
                              ORDER BY u.from_seq, u.id)
            FROM summaries u WHERE u.session_id = p_session),
          ']}')
        END INTO v_doc
      FROM (SELECT 1) one LEFT JOIN sessions x ON x.id = p_session;
      RETURN v_doc;
    END
    $fn$`);
}
