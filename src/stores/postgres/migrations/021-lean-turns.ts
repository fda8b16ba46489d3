/**
 * PostgreSQL schema version 21: less server work per turn under concurrency (issue 34), two functions
 * replaced in place with the same signatures and answers, so processes of version 20 that are still
 * running get the cheaper bodies too.
 *
 * - `threadkeep_turn_doc` (the read in the grant): its window query bounds `seq` by the whole bigint
 *   range, as the store's own window read does (`postgres/_messages.ts`). With `LIMIT p_last` alone
 *   PostgreSQL's generic plan of the PL/pgSQL statement is costed as reading a tenth of the session,
 *   so on a table without statistics (never analyzed, or autovacuum off) the function planned the
 *   statement anew on every call: 160–230 µs of server CPU a call against 60–100 µs on one plan,
 *   measured on a 2-vCPU VM (docs/benchmarks.md, `postgres-concurrency`).
 * - `threadkeep_index_pending` (the background drain): it adds the terms of the messages it indexes to
 *   `term_stats` and `owner_stats` in the statement that indexes them, together with the logged changes
 *   it folds, instead of logging them first and folding the log back out (one insert and one delete of
 *   a `term_stats_log` row per owner and term fewer). One upsert per table, rows in key order, as the
 *   fold of version 19 did, so drains still queue rather than deadlock; the drain stays the only writer
 *   of the two tables, and other writers still only log.
 */
import type { PgTx } from "../_client.js";

/** Logged changes folded into the statistics per drain statement at most (as in version 19). */
const FOLD_BATCH = 20_000;

/** Schema version 21: the turn's read on one plan, and the drain counting its own terms directly. */
export async function migrateLeanTurns(tx: PgTx): Promise<void> {
  await tx.unsafe(`
    CREATE OR REPLACE FUNCTION threadkeep_turn_doc(p_fence bigint, p_session text, p_user text, p_since bigint, p_last bigint)
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
            FROM (SELECT m.seq, m.created_at, m.body FROM messages m
                  WHERE m.session_id = p_session AND m.seq BETWEEN -9007199254740991 AND 9007199254740991
                  ORDER BY m.seq DESC LIMIT p_last) t),
          '],"summaries":[', (
            SELECT string_agg(concat('[', u.id, ',', u.from_seq, ',', u.to_seq, ',', u.created_at, ',', to_json(u.content)::text, ',', coalesce(u.metadata, 'null'), ']'), ','
                              ORDER BY u.from_seq, u.id)
            FROM summaries u WHERE u.session_id = p_session),
          ']}')
        END INTO v_doc
      FROM (SELECT 1) one LEFT JOIN sessions x ON x.id = p_session;
      RETURN v_doc;
    END
    $fn$;

    CREATE OR REPLACE FUNCTION threadkeep_index_pending(p_lang regconfig, p_limit integer) RETURNS integer
    LANGUAGE plpgsql VOLATILE AS $fn$
    DECLARE
      v_done integer;
      v_folded integer;
    BEGIN
      PERFORM set_config('synchronous_commit', 'off', true);
      WITH indexed AS (
        UPDATE messages m SET tsv = to_tsvector(p_lang, left(m.search_text, 100000))
          FROM (
            SELECT p.session_id, p.seq FROM messages p WHERE p.tsv IS NULL ORDER BY p.created_at LIMIT p_limit FOR UPDATE SKIP LOCKED
          ) q
          WHERE m.session_id = q.session_id AND m.seq = q.seq
          RETURNING m.session_id, m.tsv
      ), owned AS (
        SELECT s.user_id, i.tsv FROM indexed i JOIN sessions s ON s.id = i.session_id
      ), taken AS (
        DELETE FROM term_stats_log l WHERE l.id IN (SELECT g.id FROM term_stats_log g ORDER BY g.id LIMIT ${FOLD_BATCH} FOR UPDATE SKIP LOCKED)
        RETURNING l.user_id, l.lexeme, l.df, l.docs, l.lexemes
      ), changes AS (
        SELECT w.user_id, NULL::text AS lexeme, 0::bigint AS df, count(*)::bigint AS docs, sum(length(w.tsv))::bigint AS lexemes
          FROM owned w GROUP BY w.user_id
        UNION ALL
        SELECT w.user_id, l.lexeme, count(*)::bigint, 0::bigint, 0::bigint
          FROM owned w CROSS JOIN LATERAL unnest(tsvector_to_array(w.tsv)) l(lexeme) GROUP BY w.user_id, l.lexeme
        UNION ALL
        SELECT f.user_id, f.lexeme, f.df, f.docs, f.lexemes FROM taken f
      ), owners AS (
        INSERT INTO owner_stats AS o (user_id, docs, lexemes)
          SELECT c.user_id, sum(c.docs), sum(c.lexemes) FROM changes c WHERE c.lexeme IS NULL GROUP BY c.user_id ORDER BY c.user_id
          ON CONFLICT (user_id) DO UPDATE SET docs = o.docs + excluded.docs, lexemes = o.lexemes + excluded.lexemes
      ), terms AS (
        INSERT INTO term_stats AS t (user_id, lexeme, df)
          SELECT c.user_id, c.lexeme, sum(c.df) FROM changes c WHERE c.lexeme IS NOT NULL GROUP BY c.user_id, c.lexeme ORDER BY c.user_id, c.lexeme
          ON CONFLICT (user_id, lexeme) DO UPDATE SET df = t.df + excluded.df
      )
      SELECT (SELECT count(*) FROM owned), (SELECT count(*) FROM taken) INTO v_done, v_folded;
      -- A full fold keeps the drain going (the caller drains while a batch comes back full).
      IF v_folded = ${FOLD_BATCH} THEN
        RETURN greatest(v_done, p_limit);
      END IF;
      RETURN v_done;
    END
    $fn$;
  `);
}
