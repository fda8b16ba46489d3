/**
 * PostgreSQL schema version 19: each owner's term statistics, kept as messages are indexed and deleted,
 * so a relevance search reads BM25's document frequencies, N and the average length from two small
 * tables instead of counting them over the owner's messages every time (`postgres/_search.ts`).
 *
 * What counts is what the GIN index holds: a message counts once its `tsv` is built. Every change is
 * first logged (`term_stats_log`, insert only, so no writer waits on another's statistics rows):
 * - the background drain (`threadkeep_index_pending`, replaced here with the same signature) logs the
 *   rows it indexes, then folds the log into the two tables, in its own statement, which commits
 *   asynchronously as before; the drain is the only writer of the tables, locking their rows in key
 *   order, so drains queue rather than deadlock;
 * - an append that indexes its messages itself (more than `DEFER_UP_TO`, `postgres/_indexing.ts`) is
 *   logged once per statement from the statement's transition table (a row trigger made an append
 *   of 5,000 messages outlast the query timeout); a thin turn's append, whose rows are pending, pays
 *   one look at its own rows;
 * - a DELETE of messages (the cap, a rewind) logs its rows once per statement, from the statement's
 *   transition table; a session's deletion logs its messages before the session row goes (by the time
 *   the cascade deletes them, the owner can no longer be found).
 * Updating the tables from those writers directly deadlocked: an expiry (statistics rows, then the
 * cascade's message rows) against a drain (message rows, then statistics rows).
 * Until the next drain folds it, a change is not in the tables: a search's frequencies may lag the
 * last writes by a drain (the drain follows every write by `searchIndexDelayMs`). Frequencies may
 * reach 0 and stay as rows: harmless.
 */
import type { PgTx } from "../_client.js";

/** Logged changes folded into the statistics per drain statement at most. */
const FOLD_BATCH = 20_000;

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

    -- Changes waiting to be folded into the two tables by the drain: every other writer only inserts
    -- here, which locks no existing row. A NULL lexeme is the owner's row (docs, lexemes).
    CREATE TABLE term_stats_log (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      user_id text COLLATE "C" NOT NULL,
      lexeme text COLLATE "C",
      df bigint NOT NULL,
      docs bigint NOT NULL,
      lexemes bigint NOT NULL
    );

    -- Logs indexed messages added (p_sign 1) or removed (-1), given as parallel arrays of owner and
    -- tsvector (a transition table or a CTE cannot be passed to a function otherwise).
    CREATE FUNCTION threadkeep_count_terms(p_sign integer, p_users text[], p_tsvs tsvector[]) RETURNS void
    LANGUAGE plpgsql VOLATILE AS $fn$
    BEGIN
      IF coalesce(cardinality(p_users), 0) = 0 THEN
        RETURN;
      END IF;
      INSERT INTO term_stats_log (user_id, lexeme, df, docs, lexemes)
        SELECT r.u, NULL, 0, p_sign * count(*), p_sign * sum(length(r.t)) FROM unnest(p_users, p_tsvs) r(u, t) GROUP BY r.u
        UNION ALL
        SELECT r.u, l.lexeme, p_sign * count(*), 0, 0 FROM unnest(p_users, p_tsvs) r(u, t) CROSS JOIN LATERAL unnest(tsvector_to_array(r.t)) l(lexeme)
        GROUP BY r.u, l.lexeme;
    END
    $fn$;

    -- Folds at most p_limit logged changes into the tables, rows locked in key order (drains queue
    -- rather than deadlock); log rows another drain holds are skipped. Returns the rows folded.
    CREATE FUNCTION threadkeep_fold_terms(p_limit integer) RETURNS integer
    LANGUAGE plpgsql VOLATILE AS $fn$
    DECLARE
      v_folded integer;
    BEGIN
      WITH taken AS (
        DELETE FROM term_stats_log l WHERE l.id IN (SELECT g.id FROM term_stats_log g ORDER BY g.id LIMIT p_limit FOR UPDATE SKIP LOCKED)
        RETURNING l.user_id, l.lexeme, l.df, l.docs, l.lexemes
      ), owners AS (
        INSERT INTO owner_stats AS o (user_id, docs, lexemes)
          SELECT f.user_id, sum(f.docs), sum(f.lexemes) FROM taken f WHERE f.lexeme IS NULL GROUP BY f.user_id ORDER BY f.user_id
          ON CONFLICT (user_id) DO UPDATE SET docs = o.docs + excluded.docs, lexemes = o.lexemes + excluded.lexemes
      ), terms AS (
        INSERT INTO term_stats AS t (user_id, lexeme, df)
          SELECT f.user_id, f.lexeme, sum(f.df) FROM taken f WHERE f.lexeme IS NOT NULL GROUP BY f.user_id, f.lexeme ORDER BY f.user_id, f.lexeme
          ON CONFLICT (user_id, lexeme) DO UPDATE SET df = t.df + excluded.df
      )
      SELECT count(*) INTO v_folded FROM taken;
      RETURN v_folded;
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
      -- A full fold keeps the drain going (the caller drains while a batch comes back full).
      IF threadkeep_fold_terms(${FOLD_BATCH}) = ${FOLD_BATCH} THEN
        RETURN greatest(v_done, p_limit);
      END IF;
      RETURN v_done;
    END
    $fn$;

    -- Recounts everything (after the text search configuration changed, or to repair).
    CREATE FUNCTION threadkeep_recount_terms() RETURNS void LANGUAGE plpgsql VOLATILE AS $fn$
    BEGIN
      DELETE FROM term_stats;
      DELETE FROM owner_stats;
      DELETE FROM term_stats_log;
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
