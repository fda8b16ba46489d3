/**
 * The SQL of PostgreSQL schema version 1, as released: existing databases have run it, so it is never
 * edited, not even its indentation (nor are versions 2, 3 and 6, from the same time); a change is a
 * new version (listed in `migrations/index.ts`).
 */
import type { PgTx } from "../_client.js";

/** Schema version 1: sessions, messages, summaries, state, leases and `threadkeep_append`. */
export async function migrateInitial(tx: PgTx): Promise<void> {
  await tx`
        CREATE FUNCTION threadkeep_now_ms() RETURNS bigint LANGUAGE sql VOLATILE
        AS $$ SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint $$`;
  // COLLATE "C": byte order, as JavaScript compares ids in the other stores, and cheaper to index.
  await tx`
        CREATE TABLE sessions (
          id text COLLATE "C" PRIMARY KEY,
          user_id text COLLATE "C" NOT NULL,
          created_at bigint NOT NULL,
          last_activity_at bigint NOT NULL,
          last_seq bigint NOT NULL DEFAULT 0,
          metadata text NOT NULL DEFAULT '{}'
        )`;
  await tx`CREATE INDEX sessions_user_activity ON sessions (user_id, last_activity_at DESC, id DESC)`;
  await tx`CREATE INDEX sessions_last_activity ON sessions (last_activity_at)`;
  await tx`
        CREATE TABLE messages (
          session_id text COLLATE "C" NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
          seq bigint NOT NULL,
          created_at bigint NOT NULL,
          body text NOT NULL,
          search_text text NOT NULL,
          tsv tsvector NOT NULL,
          PRIMARY KEY (session_id, seq)
        )`;
  await tx`CREATE INDEX messages_tsv ON messages USING gin (tsv)`;
  await tx`
        CREATE TABLE summaries (
          id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
          session_id text COLLATE "C" NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
          from_seq bigint NOT NULL,
          to_seq bigint NOT NULL,
          created_at bigint NOT NULL,
          content text NOT NULL,
          metadata text
        )`;
  await tx`CREATE INDEX summaries_session ON summaries (session_id, from_seq, id)`;
  await tx`
        CREATE TABLE session_state (
          session_id text COLLATE "C" PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
          version integer NOT NULL,
          data text NOT NULL
        )`;
  // Leases outlive nothing they guard: no foreign key, because a turn may start before its session exists.
  await tx`CREATE SEQUENCE lease_fence`;
  await tx`
        CREATE TABLE leases (
          session_id text COLLATE "C" PRIMARY KEY,
          fence bigint NOT NULL,
          expires_at bigint NOT NULL
        )`;
  await tx`
        CREATE TABLE lease_queue (
          ticket bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
          session_id text COLLATE "C" NOT NULL,
          alive_until bigint NOT NULL
        )`;
  await tx`CREATE INDEX lease_queue_session ON lease_queue (session_id, ticket)`;
  await tx`CREATE INDEX lease_queue_alive ON lease_queue (alive_until)`;
  // One round trip per append. The UPDATE of the session row is the seq lock: concurrent appends
  // queue on it, and each statement after it sees every append committed before (READ COMMITTED
  // takes a fresh snapshot per statement of a volatile function), so the cap deletes what it must.
  await tx`
        CREATE FUNCTION threadkeep_append(
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
          IF p_max IS NOT NULL THEN
            DELETE FROM messages m WHERE m.session_id = p_session AND m.seq <= v_last - p_max;
          END IF;
          RETURN QUERY SELECT 'ok'::text, v_last - v_n + 1, v_now;
        END
        $fn$`;
}
