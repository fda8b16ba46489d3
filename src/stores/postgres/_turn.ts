/**
 * The PostgreSQL store's two-round-trip turn (`capabilities.combinedTurn`): the statement that grants
 * the turn lease also reads the session, its newest messages, summaries and state (`threadkeep_turn_read`,
 * schema version 7; since version 14 `threadkeep_turn_doc`, the same read as one JSON document), and the
 * turn's last write gives the lease back in its own statement ({@link releaseWithWrite},
 * `threadkeep_release_written`, schema version 8; since version 13 inside `threadkeep_append_fenced`,
 * since version 15 inside `threadkeep_append_scoped`). The functions are made by
 * `migrations/007-turn-read.ts`, `008-turn-release.ts` and `014-turn-doc.ts`; version 21
 * (`021-lean-turns.ts`) keeps the document's window query on one plan.
 *
 * Why the read is a function and not one more part of the grant's CTE: every part of a statement
 * reads as of the statement's snapshot, but the grant's `ON CONFLICT DO UPDATE` may wait on the
 * lease row and then take a version newer than that snapshot. A holder that released just after the
 * snapshot was taken, or a lapsed holder whose append held the row (`FOR SHARE`) while the grant
 * waited, committed writes the snapshot does not hold. A VOLATILE PL/pgSQL function takes a fresh
 * snapshot for each statement it runs (READ COMMITTED), and it runs only once the grant holds the row:
 * its read sees every write committed before the grant, as a separate read after it would.
 */
import { EMPTY_STATE, type TurnRead, unread } from "../../core/open-turn.js";
import type { Message, OpenedTurn, Session, SessionState, Summary } from "../../core/types.js";
import type { PgSql } from "./_client.js";

/** What a grant reads for {@link SessionStore.openTurn}: whose turn it is and how much history. */
export interface TurnReadArgs {
  userId: string;
  /** The owner's session counts as expired when inactive since before this (ms). */
  activeSince?: number;
  /** How many of the newest messages to read. */
  last: number;
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
  const session: Session = {
    id: sessionId,
    userId,
    createdAt: doc.createdAt,
    lastActivityAt: doc.lastActivityAt,
    metadata: doc.metadata,
  };
  const messages = new Array<Message>(doc.messages.length);
  for (let i = 0; i < messages.length; i++) {
    const [seq, createdAt, message] = doc.messages[i];
    message.seq = seq;
    message.createdAt = createdAt;
    messages[i] = message;
  }
  const summaries = doc.summaries.map(([id, fromSeq, toSeq, createdAt, content, metadata]): Summary => ({
    id,
    fromSeq,
    toSeq,
    content,
    createdAt,
    ...(metadata === null ? {} : { metadata }),
  }));
  const state = doc.state === null ? EMPTY_STATE : { version: doc.state[0], data: doc.state[1] };
  return { status: "ok", session, messages, summaries, state };
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
