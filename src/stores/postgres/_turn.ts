/**
 * The PostgreSQL store's two-round-trip turn (`capabilities.combinedTurn`): the statement that grants
 * the turn lease also reads the session, its newest messages, summaries and state
 * (`threadkeep_turn_read`, schema version 7), and the turn's last write gives the lease back in its own
 * statement ({@link releaseWithWrite}, `threadkeep_release_written`, schema version 8).
 *
 * Why the read is a function and not one more part of the grant's CTE: every part of a statement
 * reads as of the statement's snapshot, but the grant's `ON CONFLICT DO UPDATE` may wait on the
 * lease row and then take a version newer than that snapshot. A holder that released just after the
 * snapshot was taken, or a lapsed holder whose append held the row (`FOR SHARE`) while the grant
 * waited, committed writes the snapshot does not hold. A VOLATILE PL/pgSQL function takes a fresh
 * snapshot for each statement it runs (READ COMMITTED), and it runs only once the grant holds the row:
 * its read sees every write committed before the grant, as a separate read after it would.
 */
import type postgres from "postgres";
import { EMPTY_STATE, type TurnRead, unread } from "../../core/open-turn.js";
import type { Message, OpenedTurn, Summary } from "../../core/types.js";
import { toMessage, toSession, toSummary } from "./_rows.js";
import type { PgSql } from "./_schema.js";

type Tx = postgres.TransactionSql<Record<string, unknown>>;

/** What a grant reads for {@link SessionStore.openTurn}: whose turn it is and how much history. */
export interface TurnReadArgs {
  userId: string;
  /** The owner's session counts as expired when inactive since before this (ms). */
  activeSince?: number;
  /** How many of the newest messages to read. */
  last: number;
}

/**
 * The columns `threadkeep_turn_read` adds to a granting attempt: one row of `o_kind` `session` (the
 * status, and when `ok` the session and its state), one per message and one per summary. All null
 * when nothing was granted.
 */
export interface TurnReadRow {
  o_kind: "session" | "message" | "summary" | null;
  o_status: OpenedTurn["status"] | null;
  o_created_at: number | null;
  o_last_activity_at: number | null;
  o_metadata: string | null;
  o_state_version: number | null;
  o_state_data: string | null;
  o_seq: number | null;
  o_body: string | null;
  o_id: number | null;
  o_from_seq: number | null;
  o_to_seq: number | null;
  o_content: string | null;
}

/** Schema version 7: `threadkeep_turn_read`, the read half of a combined turn opening. */
export async function migrateTurnRead(tx: Tx): Promise<void> {
  // One statement, so the session, window, summaries and state are one snapshot, taken after the
  // grant (see the file comment). Rows, not arrays: bodies travel as they are stored, parsed once.
  // Nothing of another owner's or an expired session is read.
  await tx.unsafe(`
    CREATE FUNCTION threadkeep_turn_read(p_fence bigint, p_session text, p_user text, p_since bigint, p_last bigint)
    RETURNS TABLE (
      o_kind text, o_status text, o_created_at bigint, o_last_activity_at bigint, o_metadata text,
      o_state_version integer, o_state_data text, o_seq bigint, o_body text,
      o_id bigint, o_from_seq bigint, o_to_seq bigint, o_content text
    ) LANGUAGE plpgsql VOLATILE AS $fn$
    BEGIN
      IF p_fence IS NULL THEN
        RETURN;
      END IF;
      RETURN QUERY
        WITH s AS (
          SELECT CASE WHEN x.id IS NULL THEN 'missing' WHEN x.user_id <> p_user THEN 'foreign'
                      WHEN x.last_activity_at < p_since THEN 'expired' ELSE 'ok' END AS status,
                 x.created_at, x.last_activity_at, x.metadata
          FROM (SELECT 1) one LEFT JOIN sessions x ON x.id = p_session
        )
        SELECT 'session'::text, s.status,
               CASE WHEN s.status = 'ok' THEN s.created_at END, CASE WHEN s.status = 'ok' THEN s.last_activity_at END,
               CASE WHEN s.status = 'ok' THEN s.metadata END, st.version, st.data,
               NULL::bigint, NULL::text, NULL::bigint, NULL::bigint, NULL::bigint, NULL::text
        FROM s LEFT JOIN session_state st ON st.session_id = p_session AND s.status = 'ok'
        UNION ALL
        SELECT 'message'::text, NULL::text, t.created_at, NULL::bigint, NULL::text, NULL::integer, NULL::text,
               t.seq, t.body, NULL::bigint, NULL::bigint, NULL::bigint, NULL::text
        FROM (
          SELECT mm.seq, mm.created_at, mm.body FROM s, messages mm
          WHERE s.status = 'ok' AND mm.session_id = p_session ORDER BY mm.seq DESC LIMIT p_last
        ) t
        UNION ALL
        SELECT 'summary'::text, NULL::text, x.created_at, NULL::bigint, x.metadata, NULL::integer, NULL::text,
               NULL::bigint, NULL::text, x.id, x.from_seq, x.to_seq, x.content
        FROM s, summaries x WHERE s.status = 'ok' AND x.session_id = p_session;
    END
    $fn$`);
}

/** The lateral call a granting attempt appends (`a` is the attempt's own row, with `fence`). */
export const turnReadCall = (sql: PgSql, sessionId: string, read: TurnReadArgs) => sql`
  LEFT JOIN LATERAL threadkeep_turn_read(
    a.fence, ${sessionId}, ${read.userId}, ${read.activeSince === undefined ? null : Math.floor(read.activeSince)}::bigint,
    ${Math.max(0, Math.floor(read.last))}::bigint) r ON true`;

/** What a grant's rows read (see {@link TurnReadRow}). */
export function openedTurnOf(sessionId: string, userId: string, rows: readonly TurnReadRow[]): TurnRead {
  const head = rows.find((r) => r.o_kind === "session");
  const status = head?.o_status ?? "missing";
  if (!head || status !== "ok") return unread(status === "ok" ? "missing" : status);
  const session = toSession({
    id: sessionId,
    user_id: userId,
    created_at: head.o_created_at!,
    last_activity_at: head.o_last_activity_at!,
    metadata: head.o_metadata!,
  });
  const messages: Message[] = [];
  const summaries: Summary[] = [];
  for (const r of rows) {
    if (r.o_kind === "message") messages.push(toMessage({ seq: r.o_seq!, created_at: r.o_created_at!, body: r.o_body! }));
    else if (r.o_kind === "summary") {
      summaries.push(
        toSummary({ id: r.o_id!, from_seq: r.o_from_seq!, to_seq: r.o_to_seq!, created_at: r.o_created_at!, content: r.o_content!, metadata: r.o_metadata }),
      );
    }
  }
  messages.sort((a, b) => a.seq - b.seq);
  summaries.sort((a, b) => a.fromSeq - b.fromSeq || a.id - b.id);
  const state = head.o_state_version === null ? EMPTY_STATE : { version: head.o_state_version, data: JSON.parse(head.o_state_data!) };
  return { status: "ok", session, messages, summaries, state };
}

/**
 * Schema version 8: `threadkeep_release_written`, the release half of a combined turn commit. It gives
 * back the lease of `p_fence` (never a lease granted since) and returns how many live tickets wait for
 * the session (null when nothing was released), counted in a statement of its own: its snapshot is
 * taken after the UPDATE holds the lease row, so a waiter whose attempt held the row first (and joined
 * the line in that attempt) is counted. A waiter that comes after the row lock waits for this
 * transaction and then finds the lease free.
 *
 * No NOTIFY here: a transaction that notifies holds one cluster-wide lock from its commit until the
 * commit is flushed, so a NOTIFY in this durable transaction would put every session's commit in one
 * line behind the WAL flush (measured: 100 sessions at once fell from ~500 to ~150 turns/s). The
 * store notifies in a separate, asynchronously committed statement, and only when other processes wait.
 */
export async function migrateTurnRelease(tx: Tx): Promise<void> {
  await tx.unsafe(`
    CREATE FUNCTION threadkeep_release_written(p_session text, p_fence bigint) RETURNS bigint
    LANGUAGE plpgsql VOLATILE AS $fn$
    DECLARE
      v_waiting bigint;
    BEGIN
      UPDATE leases l SET expires_at = 0 WHERE l.session_id = p_session AND l.fence = p_fence AND l.expires_at > 0;
      IF NOT FOUND THEN
        RETURN NULL;
      END IF;
      SELECT count(*) INTO v_waiting FROM lease_queue q
        WHERE q.session_id = p_session AND q.alive_until > threadkeep_now_ms();
      RETURN v_waiting;
    END
    $fn$`);
}

/**
 * The column a write statement adds (after its own columns, over the write's `w` with `out_status`)
 * to give the turn lease back with the write: released only when the write applied (or was an
 * applied write replayed). The write function holds the lease row `FOR SHARE` already, and `fence`
 * is checked on the newest row version, so a lease granted to someone else since is never touched.
 * `waiting` is null when nothing was released, else the live tickets of the session.
 */
export const releaseWithWrite = (sql: PgSql, sessionId: string, fence: number) => sql`,
  CASE WHEN w.out_status IN ('ok', 'replayed') THEN threadkeep_release_written(${sessionId}, ${fence}::bigint) END AS waiting`;
