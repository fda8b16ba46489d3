import type { PgTx } from "../_client.js";

/**
 * Schema version 13: `threadkeep_append_fenced`, the whole of a plain append in one PL/pgSQL function,
 * where version 12 ran four nested ones (`threadkeep_append_held` → `threadkeep_lease_refused` and
 * `threadkeep_append`, then `threadkeep_cap_summarized` and `threadkeep_release_written` from the
 * statement): one call, one plan, each step in the order and under the locks they took. The session's
 * advisory lock (FIFO among writers), the lease row `FOR SHARE` and the fence-and-holder rule of
 * version 10 (`migrations/010-held-writes.ts`), the session row update (the seq lock), the insert, the cap (the
 * append's own, or with `p_keep_summarized` none past the summaries' reach, read after the write as
 * `threadkeep_cap_summarized` did), and with `p_release` the lease given back with the count of live
 * tickets, read in a statement after the lease row is updated (see `threadkeep_release_written`).
 * `out_waiting` is null when nothing was released. The owner is checked by the calling statement.
 *
 * The functions it replaces stay, unchanged, for processes of version 12 during an upgrade: both
 * kinds take the same locks in the same order, so their appends queue behind one another as before.
 */
export async function migrateFencedAppend(tx: PgTx): Promise<void> {
  await tx.unsafe(`
    CREATE FUNCTION threadkeep_append_fenced(
      p_session text, p_bodies text[], p_texts text[], p_max bigint, p_keep_summarized boolean,
      p_fence bigint, p_holder text, p_release boolean, p_lang regconfig,
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
          out_status := 'lease_expired';
          RETURN;
        END IF;
      END IF;
      v_now := threadkeep_now_ms();
      UPDATE sessions s SET last_seq = s.last_seq + v_n, last_activity_at = v_now
        WHERE s.id = p_session RETURNING s.last_seq INTO v_last;
      IF NOT FOUND THEN
        out_status := 'not_found';
        RETURN;
      END IF;
      -- The append's own cap writes no row it would drop at once (the summary-bounded one may keep them).
      INSERT INTO messages (session_id, seq, created_at, body, search_text, tsv)
        SELECT p_session, v_last - v_n + u.ord, v_now, u.body, u.txt, to_tsvector(p_lang, left(u.txt, 100000))
        FROM unnest(p_bodies, p_texts) WITH ORDINALITY AS u(body, txt, ord)
        WHERE p_max IS NULL OR p_keep_summarized OR v_last - v_n + u.ord > v_last - p_max;
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
