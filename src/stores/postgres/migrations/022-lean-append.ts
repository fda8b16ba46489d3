/**
 * PostgreSQL schema version 22: less server work per append (issue 34), the turn's write above all.
 * Nothing a caller sees changes; every part keeps the locks, their order and the answers of before.
 *
 * - `threadkeep_append_scoped` is replaced in place (same signature, same answers), so processes of
 *   version 21 still running get the new body too. Two PL/pgSQL statements fewer on a fenced,
 *   releasing append: the session's advisory lock is the one-time filter of the statement that reads
 *   the lease row `FOR SHARE` (taken before that row is read and locked, whether or not there is one),
 *   and the release and the count of waiting tickets are one statement (its snapshot is still taken
 *   after the lease row was locked, at the top of the function, so a waiter that held the row before
 *   it is counted: see `migrations/008-turn-release.ts`). Two messages, a turn's question and answer,
 *   are inserted from a two-row `VALUES` instead of a set-returning `unnest` over the arrays.
 * - The session row no longer takes a tuple lock before each update. `activity_floor` was kept by a
 *   `BEFORE UPDATE` row trigger, and PostgreSQL locks the row (a WAL record of its own) before it
 *   runs any `BEFORE UPDATE` trigger, whose `WHEN` it then compiles; inserted messages then locked the
 *   same row again for their foreign key (two SPI queries, one per message). Now the floor is moved
 *   by an `AFTER UPDATE` row trigger with the same `WHEN` (it fires once per
 *   `ACTIVITY_FLOOR_STEP_MS` of a session's activity, as before; inserts keep the `BEFORE INSERT`
 *   trigger), and `messages.session_id` has no foreign key: every write of messages (every append
 *   and history function, of this version and of older ones) updates or locks the session row first,
 *   so the session exists and cannot be deleted until that write commits. Deleting a session deletes
 *   its messages by an `AFTER DELETE` row trigger, as the key's `ON DELETE CASCADE` did (and, as
 *   then, after the session row is gone, so the messages' `term_stats` trigger finds no owner to
 *   count again: `sessions_terms_deleted` counted them before the delete). It is named to fire before
 *   `sessions_ivf_owner_gone`, as the key's trigger did.
 */
import { ACTIVITY_FLOOR_STEP_MS } from "../_activity.js";
import type { PgTx } from "../_client.js";

/** Schema version 22: the leaner append, the floor moved after the update, messages deleted by a trigger. */
export async function migrateLeanAppend(tx: PgTx): Promise<void> {
  await tx.unsafe(`
    CREATE OR REPLACE FUNCTION threadkeep_append_scoped(
      p_session text, p_bodies text[], p_texts text[], p_max bigint, p_keep_summarized boolean,
      p_fence bigint, p_holder text, p_release boolean, p_lang regconfig, p_owner text, p_since bigint,
      OUT out_status text, OUT out_first_seq bigint, OUT out_created_at bigint, OUT out_waiting bigint
    ) LANGUAGE plpgsql VOLATILE AS $fn$
    DECLARE
      v_n bigint := coalesce(cardinality(p_bodies), 0);
      v_now bigint;
      v_last bigint;
      v_fence bigint;
      v_holder text;
      v_upto bigint;
    BEGIN
      IF p_fence IS NULL THEN
        PERFORM pg_advisory_xact_lock(hashtextextended(p_session, 0));
      ELSE
        -- The advisory lock is a one-time filter: taken before the scan, so before the row lock.
        SELECT l.fence, l.holder INTO v_fence, v_holder FROM leases l
          WHERE l.session_id = p_session AND (SELECT pg_advisory_xact_lock(hashtextextended(p_session, 0))) IS NOT NULL
          FOR SHARE;
        IF (CASE WHEN p_holder IS NULL THEN coalesce(v_fence > p_fence, false)
                 ELSE v_fence IS DISTINCT FROM p_fence OR v_holder IS DISTINCT FROM p_holder END) THEN
          -- Another owner learns nothing of the session, the lease included.
          IF p_owner IS NOT NULL AND NOT EXISTS (
            SELECT 1 FROM sessions s WHERE s.id = p_session AND s.user_id = p_owner AND s.last_activity_at >= p_since
          ) THEN
            out_status := 'not_found';
          ELSE
            out_status := 'lease_expired';
          END IF;
          RETURN;
        END IF;
      END IF;
      v_now := threadkeep_now_ms();
      -- The owner and expiry are checked on the row this update locks: the probe that finds it.
      UPDATE sessions s SET last_seq = s.last_seq + v_n, last_activity_at = v_now
        WHERE s.id = p_session AND (p_owner IS NULL OR (s.user_id = p_owner AND s.last_activity_at >= p_since))
        RETURNING s.last_seq INTO v_last;
      IF NOT FOUND THEN
        out_status := 'not_found';
        RETURN;
      END IF;
      -- The append's own cap writes no row it would drop at once (the summary-bounded one may keep them).
      IF v_n = 1 THEN
        IF p_max IS NULL OR p_keep_summarized OR p_max > 0 THEN
          INSERT INTO messages (session_id, seq, created_at, body, search_text, tsv)
            VALUES (p_session, v_last, v_now, p_bodies[1], p_texts[1],
                    CASE WHEN p_lang IS NOT NULL THEN to_tsvector(p_lang, left(p_texts[1], 100000)) END);
        END IF;
      ELSIF v_n = 2 THEN
        INSERT INTO messages (session_id, seq, created_at, body, search_text, tsv)
          SELECT p_session, v_last - 2 + u.ord, v_now, u.body, u.txt, to_tsvector(p_lang, left(u.txt, 100000))
          FROM (VALUES (1, p_bodies[1], p_texts[1]), (2, p_bodies[2], p_texts[2])) AS u(ord, body, txt)
          WHERE p_max IS NULL OR p_keep_summarized OR v_last - 2 + u.ord > v_last - p_max;
      ELSE
        INSERT INTO messages (session_id, seq, created_at, body, search_text, tsv)
          SELECT p_session, v_last - v_n + u.ord, v_now, u.body, u.txt, to_tsvector(p_lang, left(u.txt, 100000))
          FROM unnest(p_bodies, p_texts) WITH ORDINALITY AS u(body, txt, ord)
          WHERE p_max IS NULL OR p_keep_summarized OR v_last - v_n + u.ord > v_last - p_max;
      END IF;
      -- Seqs start at 1: while the last seq is at most the cap, nothing lies below it.
      IF p_max IS NOT NULL AND v_last - p_max >= 1 THEN
        IF p_keep_summarized THEN
          SELECT least(v_last - p_max, coalesce(max(m.to_seq), 0)) INTO v_upto FROM summaries m WHERE m.session_id = p_session;
        ELSE
          v_upto := v_last - p_max;
        END IF;
        IF v_upto >= 1 THEN
          DELETE FROM messages m WHERE m.session_id = p_session AND m.seq <= v_upto;
        END IF;
      END IF;
      out_status := 'ok';
      out_first_seq := v_last - v_n + 1;
      out_created_at := v_now;
      IF p_release THEN
        WITH released AS (
          UPDATE leases l SET expires_at = 0 WHERE l.session_id = p_session AND l.fence = p_fence AND l.expires_at > 0
          RETURNING 1
        )
        SELECT CASE WHEN EXISTS (SELECT 1 FROM released) THEN (
          SELECT count(*) FROM lease_queue q WHERE q.session_id = p_session AND q.alive_until > threadkeep_now_ms()
        ) END INTO out_waiting;
      END IF;
    END
    $fn$;

    CREATE FUNCTION threadkeep_activity_floor_moved() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
      UPDATE sessions s SET activity_floor = s.last_activity_at WHERE s.id = NEW.id;
      RETURN NULL;
    END
    $fn$;
    DROP TRIGGER sessions_activity_floor ON sessions;
    CREATE TRIGGER sessions_activity_floor BEFORE INSERT ON sessions
      FOR EACH ROW WHEN (
        NEW.activity_floor IS NULL OR NEW.last_activity_at < NEW.activity_floor
        OR NEW.last_activity_at >= NEW.activity_floor + ${ACTIVITY_FLOOR_STEP_MS}
      ) EXECUTE FUNCTION threadkeep_activity_floor();
    -- Its own update leaves the floor equal to the activity time, so it does not fire again.
    CREATE TRIGGER sessions_activity_floor_moved AFTER UPDATE OF last_activity_at, activity_floor ON sessions
      FOR EACH ROW WHEN (
        NEW.last_activity_at < NEW.activity_floor OR NEW.last_activity_at >= NEW.activity_floor + ${ACTIVITY_FLOOR_STEP_MS}
      ) EXECUTE FUNCTION threadkeep_activity_floor_moved();

    CREATE FUNCTION threadkeep_session_messages_gone() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
      DELETE FROM messages m WHERE m.session_id = OLD.id;
      RETURN NULL;
    END
    $fn$;
    ALTER TABLE messages DROP CONSTRAINT messages_session_id_fkey;
    CREATE TRIGGER sessions_cascade_messages AFTER DELETE ON sessions
      FOR EACH ROW EXECUTE FUNCTION threadkeep_session_messages_gone();
  `);
}
