/**
 * Schema version 15: `threadkeep_append_scoped`, the append of version 13 (`threadkeep_append_fenced`)
 * with the owner checked by its own session update instead of by the calling statement.
 *
 * Why: an owner-scoped append (every `Memory.addMessages`) checked the owner in the statement's `WHERE`
 * (`EXISTS (SELECT 1 FROM sessions …)`), a second index probe of the session row that the function's
 * `UPDATE` then found again: 5–7 µs of server CPU and 6–8 µs of latency per append on a 2-vCPU VM
 * (docs/decisions/0002-postgres-schema.md). Here the `UPDATE` that
 * assigns the seq matches only this owner's session, active since `p_since`; no row is `not_found`,
 * as the statement's empty answer was. Another owner's session gets nothing written, as before. And
 * an append of one message inserts one row of `VALUES` instead of running `unnest … WITH ORDINALITY`
 * (a set-returning function scan) over one-element arrays: 7–15 µs of server CPU, 22–37 µs of latency
 * per append in a scratch copy measured beside the set-based insert (same section).
 *
 * The order of the checks keeps the answers of version 13: a fenced write refused by the lease reports
 * `not_found` when the session is not this owner's (the statement used to answer no row before the
 * lease was looked at), so a refusal never tells another owner that the session exists. What changes:
 * another owner's append now queues on the session's advisory lock before it is refused, and the
 * owner and expiry are read from the session row under its lock rather than the statement's snapshot.
 *
 * Version 13's function stays, unchanged, for processes of version 14 during an upgrade: both take the
 * same locks in the same order, so their appends queue behind one another.
 */
import type { PgTx } from "../_client.js";

/** Creates `threadkeep_append_scoped` (schema version 15). */
export async function migrateScopedAppend(tx: PgTx): Promise<void> {
  await tx.unsafe(`
    CREATE FUNCTION threadkeep_append_scoped(
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
      PERFORM pg_advisory_xact_lock(hashtextextended(p_session, 0));
      IF p_fence IS NOT NULL THEN
        SELECT l.fence, l.holder INTO v_fence, v_holder FROM leases l WHERE l.session_id = p_session FOR SHARE;
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
      -- One message, the common append, is one row of VALUES: no set-returning unnest to run, and no
      -- text cut for a tsvector nobody asked for (pending rows are indexed later, postgres/_indexing.ts).
      IF v_n = 1 THEN
        IF p_max IS NULL OR p_keep_summarized OR p_max > 0 THEN
          INSERT INTO messages (session_id, seq, created_at, body, search_text, tsv)
            VALUES (p_session, v_last, v_now, p_bodies[1], p_texts[1],
                    CASE WHEN p_lang IS NOT NULL THEN to_tsvector(p_lang, left(p_texts[1], 100000)) END);
        END IF;
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
        UPDATE leases l SET expires_at = 0 WHERE l.session_id = p_session AND l.fence = p_fence AND l.expires_at > 0;
        IF FOUND THEN
          SELECT count(*) INTO out_waiting FROM lease_queue q
            WHERE q.session_id = p_session AND q.alive_until > threadkeep_now_ms();
        END IF;
      END IF;
    END
    $fn$`);
}
