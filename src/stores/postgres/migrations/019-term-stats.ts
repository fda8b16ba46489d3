/**
 * PostgreSQL schema version 19: each owner's term statistics, kept as messages are indexed and deleted,
 * so a relevance search reads BM25's document frequencies, N and the average length from two small
 * tables instead of counting them over the owner's messages every time (`postgres/_search.ts`).
 *
 * What counts is what the GIN index holds: a message counts once its `tsv` is built. The statistics
 * are kept off a turn's two statements wherever they can be:
 * - the background drain (`threadkeep_index_pending`, replaced here with the same signature) adds the
 *   rows it indexes, in its own statement, which commits asynchronously as before;
 * - an append that indexes its messages itself (more than `DEFER_UP_TO`, `postgres/_indexing.ts`) is
 *   counted once per statement from the statement's transition table (a row trigger, which a
 *   `WHEN (NEW.tsv IS NOT NULL)` would have kept off thin turns entirely, made an append of 5,000
 *   messages outlast the query timeout); a thin turn's append, whose rows are pending, pays one
 *   look at its own two rows;
 * - a DELETE of messages (the cap, a rewind) subtracts its rows once per statement, from the
 *   statement's transition table; a session's deletion subtracts its messages before the session
 *   row goes (by the time the cascade deletes them, the owner can no longer be found).
 * Frequencies may reach 0 and stay as rows: harmless, and cheaper than deleting them under
 * concurrency. Rows lock in lexeme order, so concurrent writers of one owner queue rather than deadlock.
 */
import type { PgTx } from "../_client.js";

/** Schema version 19: `term_stats`, `owner_stats`, their upkeep, and the statistics of what is indexed. */
export async function migrateTermStats(tx: PgTx): Promise<void> {
  await tx.unsafe(`
    CREATE TABLE term_stats (
      user_id text COLLATE "C" NOT NULL,
      lexeme text COLLATE "C" NOT NULL,
      df bigint NOT NULL,
      PRIMARY KEY (user_id, lexeme)
    );
    CREATE TABLE owner_stats (
      user_id text COLLATE "C" PRIMARY KEY,
      docs bigint NOT NULL,
      lexemes bigint NOT NULL
    );

    -- Adds (p_sign 1) or subtracts (-1) indexed messages, given as parallel arrays of owner and tsvector
    -- (a transition table or a CTE cannot be passed to a function otherwise).
    CREATE FUNCTION threadkeep_count_terms(p_sign integer, p_users text[], p_tsvs tsvector[]) RETURNS void
    LANGUAGE plpgsql VOLATILE AS $fn$
    BEGIN
      IF coalesce(cardinality(p_users), 0) = 0 THEN
        RETURN;
      END IF;
      INSERT INTO owner_stats AS o (user_id, docs, lexemes)
        SELECT r.u, p_sign * count(*), p_sign * sum(length(r.t)) FROM unnest(p_users, p_tsvs) r(u, t)
        GROUP BY r.u ORDER BY r.u
        ON CONFLICT (user_id) DO UPDATE SET docs = o.docs + excluded.docs, lexemes = o.lexemes + excluded.lexemes;
      INSERT INTO term_stats AS t (user_id, lexeme, df)
        SELECT r.u, l.lexeme, p_sign * count(*) FROM unnest(p_users, p_tsvs) r(u, t) CROSS JOIN LATERAL unnest(tsvector_to_array(r.t)) l(lexeme)
        GROUP BY r.u, l.lexeme ORDER BY r.u, l.lexeme
        ON CONFLICT (user_id, lexeme) DO UPDATE SET df = t.df + excluded.df;
    END
    $fn$;

    CREATE FUNCTION threadkeep_terms_inserted() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
      IF NOT EXISTS (SELECT 1 FROM inserted_rows n WHERE n.tsv IS NOT NULL) THEN
        RETURN NULL;
      END IF;
      PERFORM threadkeep_count_terms(1, array_agg(s.user_id), array_agg(n.tsv))
        FROM inserted_rows n JOIN sessions s ON s.id = n.session_id WHERE n.tsv IS NOT NULL;
      RETURN NULL;
    END
    $fn$;
    CREATE TRIGGER messages_terms_inserted AFTER INSERT ON messages
      REFERENCING NEW TABLE AS inserted_rows FOR EACH STATEMENT EXECUTE FUNCTION threadkeep_terms_inserted();

    CREATE FUNCTION threadkeep_terms_deleted() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
      PERFORM threadkeep_count_terms(-1, array_agg(s.user_id), array_agg(o.tsv))
        FROM deleted_rows o JOIN sessions s ON s.id = o.session_id WHERE o.tsv IS NOT NULL HAVING count(*) > 0;
      RETURN NULL;
    END
    $fn$;
    CREATE TRIGGER messages_terms_deleted AFTER DELETE ON messages
      REFERENCING OLD TABLE AS deleted_rows FOR EACH STATEMENT EXECUTE FUNCTION threadkeep_terms_deleted();

    CREATE FUNCTION threadkeep_session_terms_deleted() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
      PERFORM threadkeep_count_terms(-1, array_agg(OLD.user_id), array_agg(m.tsv))
        FROM messages m WHERE m.session_id = OLD.id AND m.tsv IS NOT NULL HAVING count(*) > 0;
      RETURN OLD;
    END
    $fn$;
    CREATE TRIGGER sessions_terms_deleted BEFORE DELETE ON sessions
      FOR EACH ROW EXECUTE FUNCTION threadkeep_session_terms_deleted();

    -- Version 12's drain, now counting what it indexes in the same statement.
    CREATE OR REPLACE FUNCTION threadkeep_index_pending(p_lang regconfig, p_limit integer) RETURNS integer
    LANGUAGE plpgsql VOLATILE AS $fn$
    DECLARE
      v_done integer;
      v_users text[];
      v_tsvs tsvector[];
    BEGIN
      PERFORM set_config('synchronous_commit', 'off', true);
      WITH indexed AS (
        UPDATE messages m SET tsv = to_tsvector(p_lang, left(m.search_text, 100000))
          FROM (
            SELECT p.session_id, p.seq FROM messages p WHERE p.tsv IS NULL ORDER BY p.created_at LIMIT p_limit FOR UPDATE SKIP LOCKED
          ) q
          WHERE m.session_id = q.session_id AND m.seq = q.seq
          RETURNING m.session_id, m.tsv
      )
      SELECT count(*), array_agg(s.user_id), array_agg(i.tsv) INTO v_done, v_users, v_tsvs
        FROM indexed i JOIN sessions s ON s.id = i.session_id;
      PERFORM threadkeep_count_terms(1, v_users, v_tsvs);
      RETURN v_done;
    END
    $fn$;

    -- Recounts everything (after the text search configuration changed, or to repair).
    CREATE FUNCTION threadkeep_recount_terms() RETURNS void LANGUAGE plpgsql VOLATILE AS $fn$
    BEGIN
      DELETE FROM term_stats;
      DELETE FROM owner_stats;
      INSERT INTO owner_stats (user_id, docs, lexemes)
        SELECT s.user_id, count(*), sum(length(m.tsv)) FROM messages m JOIN sessions s ON s.id = m.session_id
        WHERE m.tsv IS NOT NULL GROUP BY s.user_id;
      INSERT INTO term_stats (user_id, lexeme, df)
        SELECT s.user_id, l.lexeme, count(*) FROM messages m JOIN sessions s ON s.id = m.session_id
        CROSS JOIN LATERAL unnest(tsvector_to_array(m.tsv)) l(lexeme)
        WHERE m.tsv IS NOT NULL GROUP BY s.user_id, l.lexeme;
    END
    $fn$;
    SELECT threadkeep_recount_terms();
  `);
}
