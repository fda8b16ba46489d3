/**
 * The PostgreSQL store's two-round-trip turn (`capabilities.combinedTurn`): the statement that grants
 * the turn lease also reads the session, its newest messages, summaries and state (`threadkeep_turn_read`,
 * schema version 7; since version 14 `threadkeep_turn_doc`, the same read as one JSON document), and the
 * turn's last write gives the lease back in its own statement ({@link releaseWithWrite},
 * `threadkeep_release_written`, schema version 8; since version 13 inside `threadkeep_append_fenced`,
 * since version 15 inside `threadkeep_append_scoped`).
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
import type { Message, OpenedTurn, Session, SessionState, Summary } from "../../core/types.js";
import type { PgSql } from "./_client.js";

type Tx = postgres.TransactionSql<Record<string, unknown>>;

/** What a grant reads for {@link SessionStore.openTurn}: whose turn it is and how much history. */
export interface TurnReadArgs {
  userId: string;
  /** The owner's session counts as expired when inactive since before this (ms). */
  activeSince?: number;
  /** How many of the newest messages to read. */
  last: number;
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

/**
 * Schema version 14: `threadkeep_turn_doc`, the read of version 7 as one JSON document in one column
 * of the granting statement's one row, instead of a row per message and summary of thirteen columns
 * (with the attempt's six repeated on each): the client decodes one value and parses it once, where it
 * decoded ~20 rows of ~19 columns and parsed each body apart (~90 µs of client CPU per turn, measured
 * with the same rows made by `generate_series`), and the server sends one row and fills no tuplestore.
 * The stored JSON (bodies, metadata, state) is spliced in as it is; summary content, plain text, is
 * quoted by `to_json`. `{"status": …}` alone for a session not read (missing, another owner's, expired).
 *
 * Why PL/pgSQL, and not SQL: a VOLATILE SQL scalar function may be inlined into the calling statement
 * and would then read with that statement's snapshot, taken before the grant (see the file comment);
 * a PL/pgSQL function is never inlined, and its statement takes a snapshot of its own when it runs,
 * which is after the grant holds the lease row: the function is called with the grant's fence.
 * Version 7's function stays for processes of the previous version during an upgrade.
 */
export async function migrateTurnDoc(tx: Tx): Promise<void> {
  await tx.unsafe(`
    CREATE FUNCTION threadkeep_turn_doc(p_fence bigint, p_session text, p_user text, p_since bigint, p_last bigint)
    RETURNS text LANGUAGE plpgsql VOLATILE AS $fn$
    DECLARE
      v_doc text;
    BEGIN
      IF p_fence IS NULL THEN
        RETURN NULL;
      END IF;
      SELECT CASE
        WHEN x.id IS NULL THEN '{"status":"missing"}'
        WHEN x.user_id <> p_user THEN '{"status":"foreign"}'
        WHEN x.last_activity_at < p_since THEN '{"status":"expired"}'
        ELSE concat('{"status":"ok","createdAt":', x.created_at, ',"lastActivityAt":', x.last_activity_at,
          ',"metadata":', x.metadata,
          ',"state":', coalesce((SELECT concat('[', st.version, ',', st.data, ']') FROM session_state st WHERE st.session_id = p_session), 'null'),
          ',"messages":[', (
            SELECT string_agg(concat('[', t.seq, ',', t.created_at, ',', t.body, ']'), ',' ORDER BY t.seq)
            FROM (SELECT m.seq, m.created_at, m.body FROM messages m WHERE m.session_id = p_session ORDER BY m.seq DESC LIMIT p_last) t),
          '],"summaries":[', (
            SELECT string_agg(concat('[', u.id, ',', u.from_seq, ',', u.to_seq, ',', u.created_at, ',', to_json(u.content)::text, ',', coalesce(u.metadata, 'null'), ']'), ','
                              ORDER BY u.from_seq, u.id)
            FROM summaries u WHERE u.session_id = p_session),
          ']}')
        END INTO v_doc
      FROM (SELECT 1) one LEFT JOIN sessions x ON x.id = p_session;
      RETURN v_doc;
    END
    $fn$`);
}

/** The column a granting attempt adds (`a` is the attempt's own row, with `fence`): the turn's document. */
export const turnDocColumn = (sql: PgSql, sessionId: string, read: TurnReadArgs) => sql`,
  threadkeep_turn_doc(
    a.fence, ${sessionId}, ${read.userId}, ${read.activeSince === undefined ? null : Math.floor(read.activeSince)}::bigint,
    ${Math.max(0, Math.floor(read.last))}::bigint) AS turn`;

/** The document `threadkeep_turn_doc` builds, parsed. */
interface TurnDoc {
  status: OpenedTurn["status"];
  createdAt: number;
  lastActivityAt: number;
  metadata: Session["metadata"];
  /** [version, data], or null when the state was never written. */
  state: [number, SessionState["data"]] | null;
  /** [seq, createdAt, body], oldest first. */
  messages: [number, number, Message][];
  /** [id, fromSeq, toSeq, createdAt, content, metadata], in `fromSeq`, `id` order. */
  summaries: [number, number, number, number, string, Summary["metadata"] | null][];
}

/** What a grant read (the `turn` column of {@link turnDocColumn}; null when nothing was granted). */
export function openedTurnOf(sessionId: string, userId: string, turn: string | null): TurnRead {
  const doc = turn === null ? null : (JSON.parse(turn) as TurnDoc);
  if (!doc) return unread("missing");
  if (doc.status !== "ok") return unread(doc.status);
  const session: Session = { id: sessionId, userId, createdAt: doc.createdAt, lastActivityAt: doc.lastActivityAt, metadata: doc.metadata };
  const messages = new Array<Message>(doc.messages.length);
  for (let i = 0; i < messages.length; i++) {
    const [seq, createdAt, message] = doc.messages[i];
    message.seq = seq;
    message.createdAt = createdAt;
    messages[i] = message;
  }
  const summaries = doc.summaries.map(
    ([id, fromSeq, toSeq, createdAt, content, metadata]): Summary => ({ id, fromSeq, toSeq, content, createdAt, ...(metadata === null ? {} : { metadata }) }),
  );
  const state = doc.state === null ? EMPTY_STATE : { version: doc.state[0], data: doc.state[1] };
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
