/**
 * The PostgreSQL store's summary-bounded cap (`keepUnsummarized`): `threadkeep_cap_summarized`, run by
 * the write's own statement after the write function (as {@link capWithWrite}), so it applies in the
 * write's transaction while the write holds the session row: no other write, delete or re-creation of
 * the session comes between the write and the cap. Being a VOLATILE PL/pgSQL function, it reads
 * with a fresh snapshot, after the write, and sees every summary committed before it.
 */
import type postgres from "postgres";
import type { PgSql } from "./_client.js";

type Tx = postgres.TransactionSql<Record<string, unknown>>;

/**
 * Schema version 9: `threadkeep_cap_summarized(session, max)` drops the messages older than the
 * newest `max` seqs (the seq bound the append's own cap uses), but none past the furthest seq the
 * session's summaries reach. Returns how many it dropped.
 */
export async function migrateSummaryCap(tx: Tx): Promise<void> {
  await tx.unsafe(`
    CREATE FUNCTION threadkeep_cap_summarized(p_session text, p_max bigint) RETURNS bigint
    LANGUAGE plpgsql VOLATILE AS $fn$
    DECLARE
      v_upto bigint;
      v_dropped bigint;
    BEGIN
      SELECT least(s.last_seq - p_max, (SELECT coalesce(max(m.to_seq), 0) FROM summaries m WHERE m.session_id = p_session))
        INTO v_upto FROM sessions s WHERE s.id = p_session;
      IF v_upto IS NULL OR v_upto < 1 THEN
        RETURN 0;
      END IF;
      DELETE FROM messages m WHERE m.session_id = p_session AND m.seq <= v_upto;
      GET DIAGNOSTICS v_dropped = ROW_COUNT;
      RETURN v_dropped;
    END
    $fn$`);
}

/**
 * The column a write statement adds (over the write's `w` with `out_status`) to apply a cap of
 * `maxMessages` bounded by the summaries, only when the write applied. The write function then gets
 * no cap of its own (it would drop regardless of summaries).
 */
export const capWithWrite = (sql: PgSql, sessionId: string, maxMessages: number) => sql`,
  CASE WHEN w.out_status = 'ok' THEN threadkeep_cap_summarized(${sessionId}, ${maxMessages}::bigint) END AS capped`;

/**
 * Schema version 12, part 3: `threadkeep_cap_summarized` returns before reading the summaries when
 * the cap cannot drop anything (the session's last seq at most the cap: seqs start at 1), as the
 * append's own cap does since version 11. Before, every write of `Memory` with a summarizer read the
 * session's summaries for their furthest seq under the cap too. Same signature; otherwise the
 * version 9 function.
 */
export async function migrateSummaryCapGuard(tx: Tx): Promise<void> {
  await tx.unsafe(`
    CREATE OR REPLACE FUNCTION threadkeep_cap_summarized(p_session text, p_max bigint) RETURNS bigint
    LANGUAGE plpgsql VOLATILE AS $fn$
    DECLARE
      v_last bigint;
      v_upto bigint;
      v_dropped bigint;
    BEGIN
      SELECT s.last_seq INTO v_last FROM sessions s WHERE s.id = p_session;
      IF v_last IS NULL OR v_last - p_max < 1 THEN
        RETURN 0;
      END IF;
      SELECT least(v_last - p_max, coalesce(max(m.to_seq), 0)) INTO v_upto FROM summaries m WHERE m.session_id = p_session;
      IF v_upto < 1 THEN
        RETURN 0;
      END IF;
      DELETE FROM messages m WHERE m.session_id = p_session AND m.seq <= v_upto;
      GET DIAGNOSTICS v_dropped = ROW_COUNT;
      RETURN v_dropped;
    END
    $fn$`);
}
