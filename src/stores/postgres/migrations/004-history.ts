/** PostgreSQL schema version 4 (the history writes that use it: `postgres/_history.ts`). */
import { OPERATION_HISTORY } from "../../../core/types.js";
import type { PgTx } from "../_client.js";

/** Schema version 4: branches, operations, and `threadkeep_write`. */
export async function migrateHistory(tx: PgTx): Promise<void> {
  await tx`
    CREATE TABLE branches (
      session_id text COLLATE "C" NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
      id bigint NOT NULL,
      at_seq bigint NOT NULL,
      parent_id bigint,
      reason text NOT NULL,
      created_at bigint NOT NULL,
      metadata text,
      messages text NOT NULL,
      PRIMARY KEY (session_id, id)
    )`;
  await tx`
    CREATE TABLE operations (
      session_id text COLLATE "C" NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
      id text NOT NULL,
      n bigint GENERATED ALWAYS AS IDENTITY,
      digest text NOT NULL,
      from_seq bigint NOT NULL,
      to_seq bigint NOT NULL,
      at bigint NOT NULL,
      PRIMARY KEY (session_id, id)
    )`;
  await tx`CREATE INDEX operations_age ON operations (session_id, n)`;
  // One round trip for an idempotent append or a tail replacement. It queues on the same advisory lock
  // as appends, so a concurrent append lands wholly before or after it; the tail it removes is kept as
  // a branch in the same transaction. Statuses: ok, replayed, not_found, lease_expired,
  // operation_conflict, history_conflict (with the stored first and last seq).
  await tx.unsafe(`
    CREATE FUNCTION threadkeep_write(
      p_session text, p_after bigint, p_bodies text[], p_texts text[], p_max bigint, p_fence bigint,
      p_lang regconfig, p_op text, p_digest text, p_expected bigint, p_reason text, p_branch_meta text
    ) RETURNS TABLE (out_status text, out_first_seq bigint, out_last_seq bigint, out_created_at bigint)
    LANGUAGE plpgsql VOLATILE AS $fn$
    DECLARE
      v_n bigint := coalesce(cardinality(p_bodies), 0);
      v_now bigint := threadkeep_now_ms();
      v_fence bigint;
      v_first bigint;
      v_last bigint;
      v_after bigint;
      v_branch bigint;
      v_op record;
      v_status text;
      v_created bigint;
    BEGIN
      PERFORM pg_advisory_xact_lock(hashtextextended(p_session, 0));
      SELECT s.last_seq INTO v_last FROM sessions s WHERE s.id = p_session FOR UPDATE;
      IF NOT FOUND THEN
        RETURN QUERY SELECT 'not_found'::text, NULL::bigint, NULL::bigint, NULL::bigint;
        RETURN;
      END IF;
      IF p_op IS NOT NULL THEN
        SELECT o.digest, o.from_seq, o.to_seq INTO v_op FROM operations o WHERE o.session_id = p_session AND o.id = p_op;
        IF FOUND THEN
          IF v_op.digest <> p_digest THEN
            RETURN QUERY SELECT 'operation_conflict'::text, NULL::bigint, NULL::bigint, NULL::bigint;
          ELSE
            RETURN QUERY SELECT 'replayed'::text, v_op.from_seq, v_op.to_seq, NULL::bigint;
          END IF;
          RETURN;
        END IF;
      END IF;
      IF p_fence IS NOT NULL THEN
        SELECT l.fence INTO v_fence FROM leases l WHERE l.session_id = p_session FOR SHARE;
        IF v_fence > p_fence THEN
          RETURN QUERY SELECT 'lease_expired'::text, NULL::bigint, NULL::bigint, NULL::bigint;
          RETURN;
        END IF;
      END IF;
      v_after := v_last;
      IF p_after IS NOT NULL THEN
        SELECT coalesce(min(m.seq), 1) INTO v_first FROM messages m WHERE m.session_id = p_session;
        IF (p_expected IS NOT NULL AND v_last <> p_expected) OR p_after < v_first - 1 OR p_after > v_last THEN
          RETURN QUERY SELECT 'history_conflict'::text, v_first, v_last, NULL::bigint;
          RETURN;
        END IF;
        v_after := p_after;
        IF p_reason IS NOT NULL AND v_last > p_after THEN
          SELECT coalesce(max(b.id), 0) + 1 INTO v_branch FROM branches b WHERE b.session_id = p_session;
          UPDATE branches b SET parent_id = v_branch
            WHERE b.session_id = p_session AND b.parent_id IS NULL AND b.at_seq > p_after;
          INSERT INTO branches (session_id, id, at_seq, parent_id, reason, created_at, metadata, messages)
            SELECT p_session, v_branch, p_after, NULL, p_reason, v_now, p_branch_meta,
                   '[' || string_agg('{"seq":' || m.seq || ',"createdAt":' || m.created_at || ',' || substr(m.body, 2), ',' ORDER BY m.seq) || ']'
            FROM messages m WHERE m.session_id = p_session AND m.seq > p_after;
        END IF;
        DELETE FROM messages m WHERE m.session_id = p_session AND m.seq > p_after;
        UPDATE sessions s SET last_seq = p_after WHERE s.id = p_session;
      END IF;
      SELECT a.out_status, a.out_created_at INTO v_status, v_created FROM threadkeep_append(p_session, p_bodies, p_texts, p_max, NULL, p_lang) a;
      IF p_op IS NOT NULL THEN
        INSERT INTO operations (session_id, id, digest, from_seq, to_seq, at)
          VALUES (p_session, p_op, p_digest, v_after + 1, v_after + v_n, v_created);
        DELETE FROM operations o WHERE o.session_id = p_session AND o.n <= (
          SELECT o2.n FROM operations o2 WHERE o2.session_id = p_session ORDER BY o2.n DESC OFFSET ${OPERATION_HISTORY} LIMIT 1);
      END IF;
      RETURN QUERY SELECT v_status, v_after + 1, v_after + v_n, v_created;
    END
    $fn$`);
}
