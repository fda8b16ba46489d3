/**
 * PostgreSQL schema version 12, in three parts: full-text indexing off the append (`postgres/_indexing.ts`),
 * the activity floor (`postgres/_activity.ts`), and the summary cap's early return (`postgres/_cap.ts`).
 */
import { ACTIVITY_FLOOR_STEP_MS } from "../_activity.js";
import type { PgTx } from "../_client.js";

/**
 * Schema version 12, part 1: `tsv` may be NULL (pending); the GIN index only over built tsvectors (a
 * NULL would still cost an append a GIN entry; rebuilding it takes about 13 s per million messages on
 * a 2-core machine, once); the pending index, keyed by `created_at` (new rows go to its right edge, and
 * the drain takes the oldest first); and the drain.
 */
async function deferIndexing(tx: PgTx): Promise<void> {
  await tx`ALTER TABLE messages ALTER COLUMN tsv DROP NOT NULL`;
  await tx`DROP INDEX messages_tsv`;
  await tx`CREATE INDEX messages_tsv ON messages USING gin (tsv) WHERE tsv IS NOT NULL`;
  await tx`CREATE INDEX messages_unindexed ON messages (created_at) WHERE tsv IS NULL`;
  // Rows another drain (or a cap, a truncation) holds are skipped, not waited for: no drain waits on
  // another, and an append's cap waits for at most one batch. The commit need not wait for its flush.
  await tx.unsafe(`
    CREATE FUNCTION threadkeep_index_pending(p_lang regconfig, p_limit integer) RETURNS integer
    LANGUAGE plpgsql VOLATILE AS $fn$
    DECLARE
      v_done integer;
    BEGIN
      PERFORM set_config('synchronous_commit', 'off', true);
      UPDATE messages m SET tsv = to_tsvector(p_lang, left(m.search_text, 100000))
        FROM (
          SELECT p.session_id, p.seq FROM messages p WHERE p.tsv IS NULL ORDER BY p.created_at LIMIT p_limit FOR UPDATE SKIP LOCKED
        ) q
        WHERE m.session_id = q.session_id AND m.seq = q.seq;
      GET DIAGNOSTICS v_done = ROW_COUNT;
      RETURN v_done;
    END
    $fn$`);
}

/** Schema version 12, part 2: `activity_floor`, its trigger, and the indexes moved onto it. */
async function addActivityFloor(tx: PgTx): Promise<void> {
  await tx`ALTER TABLE sessions ADD COLUMN activity_floor bigint`;
  await tx`UPDATE sessions SET activity_floor = last_activity_at`;
  await tx`ALTER TABLE sessions ALTER COLUMN activity_floor SET NOT NULL`;
  await tx.unsafe(`
    CREATE FUNCTION threadkeep_activity_floor() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
      NEW.activity_floor := NEW.last_activity_at;
      RETURN NEW;
    END
    $fn$`);
  // The WHEN clause is evaluated without calling the function: an append that leaves the floor as it
  // is pays no PL/pgSQL call. An INSERT of an older process names no floor; that is the NULL case.
  await tx.unsafe(`
    CREATE TRIGGER sessions_activity_floor BEFORE INSERT OR UPDATE OF last_activity_at, activity_floor ON sessions
    FOR EACH ROW WHEN (
      NEW.activity_floor IS NULL OR NEW.last_activity_at < NEW.activity_floor
      OR NEW.last_activity_at >= NEW.activity_floor + ${ACTIVITY_FLOOR_STEP_MS}
    ) EXECUTE FUNCTION threadkeep_activity_floor()`);
  await tx`DROP INDEX sessions_user_activity`;
  await tx`DROP INDEX sessions_last_activity`;
  await tx`CREATE INDEX sessions_user_floor ON sessions (user_id, activity_floor DESC, id DESC)`;
  await tx`CREATE INDEX sessions_floor ON sessions (activity_floor)`;
}

/**
 * Schema version 12, part 3: `threadkeep_cap_summarized` returns before reading the summaries when
 * the cap cannot drop anything (the session's last seq at most the cap: seqs start at 1), as the
 * append's own cap does since version 11. Before, every write of `Memory` with a summarizer read the
 * session's summaries for their furthest seq under the cap too. Same signature; otherwise the
 * version 9 function.
 */
async function guardSummaryCap(tx: PgTx): Promise<void> {
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

/** Schema version 12: its three parts, in the order they were released. */
export async function migrateDeferredIndexing(tx: PgTx): Promise<void> {
  await deferIndexing(tx);
  await addActivityFloor(tx);
  await guardSummaryCap(tx);
}
