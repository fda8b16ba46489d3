/**
 * The SQLite store's prepared statements, made once per open database (the row shapes are in `_rows.ts`).
 */
import type Database from "better-sqlite3";
import { ACTIVE_SINCE, ACTIVITY, hourOf, INACTIVE_SESSIONS_SQL, LIST_AFTER_SQL, SESSION_COLUMNS } from "./_activity.js";
import type { MessageRow, SessionRow, SqliteStatement, StateRow, SummaryRow } from "./_rows.js";
import { prepareSearchStatements } from "./_search-statements.js";

const MESSAGE_COLUMNS = "m.seq, m.created_at, m.body";
/** How many "last N" statements with a literal LIMIT are kept; callers use a handful of window sizes. */
const NEWEST_CACHE = 16;
/** The read of a session's newest `count` messages (the context window), newest first. */
export const newestMessagesSql = (count: number) =>
  `SELECT ${MESSAGE_COLUMNS} FROM messages m WHERE m.session_id = ? ORDER BY m.seq DESC LIMIT ${count}`;

/**
 * The same read of a session of this owner active since a time: `session_id, user_id, active_since, active_since`.
 * No row when there is no such session, or when it has no messages (the caller tells them apart).
 */
export const newestOwnedSql = (count: number) =>
  `SELECT ${MESSAGE_COLUMNS} FROM messages m WHERE m.session_id = (
     SELECT id FROM sessions WHERE id = ? AND user_id = ? AND ${ACTIVE_SINCE})
   ORDER BY m.seq DESC LIMIT ${count}`;

/** The same read within seq bounds: `session_id, from, to, limit`. */
export const RANGE_NEWEST_FIRST_SQL = `SELECT ${MESSAGE_COLUMNS} FROM messages m
  WHERE m.session_id = ? AND m.seq BETWEEN ? AND ? ORDER BY m.seq DESC LIMIT ?`;

/**
 * Applies the cap of a write that left seqs `firstSeq..lastSeq` in session `id`: keeps the newest
 * `maxMessages` (none past the summaries' reach with `keepUnsummarized`). Seqs have gaps only where a
 * corrupt row was quarantined, so the seq span bounds the count from above: under the cap, the exact
 * (row-walking) DELETE is skipped.
 */
export function applyCap(
  st: Pick<SqliteStatements, "capMessages" | "capSummarized">,
  id: string,
  firstSeq: number,
  lastSeq: number,
  options: { maxMessages?: number; keepUnsummarized?: boolean; hardCap?: number },
): void {
  const max = options.maxMessages ?? 0;
  if (max <= 0 || lastSeq - firstSeq + 1 <= max) return;
  if (!options.keepUnsummarized) {
    st.capMessages.run(id, id, max);
    return;
  }
  st.capSummarized.run(id, id, max, id);
  // The ceiling, whatever the summaries reach (a plain cap of `hardCap`).
  const hard = Math.floor(options.hardCap ?? 0);
  if (hard > 0 && lastSeq - firstSeq + 1 > hard) st.capMessages.run(id, id, hard);
}

/**
 * What an append reads of its session: its key, its last seq before the append, how far the full-text
 * index has it (whether it is in the indexer's queue, the highest indexed seq), its creation time (which incarnation
 * of the id it is), and the row's own activity and its hour (whether the append must write the row).
 */
export type AppendHeadRow = [
  key: number,
  lastSeq: number | null,
  queued: number,
  ftsSeq: number,
  createdAt: number,
  activeHour: number | null,
  rowActivityAt: number,
];

/** The columns of {@link AppendHeadRow}. */
const APPEND_HEAD = `key, (SELECT seq FROM messages WHERE session_id = sessions.id ORDER BY seq DESC LIMIT 1),
   EXISTS (SELECT 1 FROM fts_queue WHERE key = sessions.key), fts_seq, created_at, active_hour, last_activity_at`;

/** Prepares every statement the store runs. */
export function prepareStatements(db: Database.Database) {
  const q = <Row = unknown>(sql: string): SqliteStatement<Row> => db.prepare<unknown[], Row>(sql);
  const rows = (sql: string): SqliteStatement<MessageRow> => db.prepare<unknown[], MessageRow>(sql).raw();
  const newestBy = new Map<number, SqliteStatement<MessageRow>>();
  const newestOwnedBy = new Map<number, SqliteStatement<MessageRow>>();
  const rangeNewestFirst = rows(RANGE_NEWEST_FIRST_SQL);
  const listAfter = q<SessionRow>(LIST_AFTER_SQL);
  const inactiveSessions = q<{ id: string }>(INACTIVE_SESSIONS_SQL);
  return {
    ...prepareSearchStatements(db),
    /**
     * The newest `count` messages of a session, newest first. The LIMIT is a literal: SQLite answers
     * that about a fifth faster than a bound LIMIT for the same plan (measured, bench/store.ts).
     */
    newest(sessionId: string, count: number): MessageRow[] {
      let statement = newestBy.get(count);
      if (!statement && newestBy.size < NEWEST_CACHE && Number.isSafeInteger(count)) {
        statement = rows(newestMessagesSql(count));
        newestBy.set(count, statement);
      }
      if (statement) return statement.all(sessionId);
      return rangeNewestFirst.all(sessionId, Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER, count);
    },
    /**
     * {@link newest} of a session of `userId` active since `activeSince`, in the same statement: an
     * empty result is a missing, another owner's or an expired session, or one with no messages.
     * Undefined for a `count` with no cached statement (the caller checks the owner apart).
     */
    newestOwned(sessionId: string, userId: string, activeSince: number, count: number): MessageRow[] | undefined {
      let statement = newestOwnedBy.get(count);
      if (!statement && newestOwnedBy.size < NEWEST_CACHE && Number.isSafeInteger(count)) {
        statement = rows(newestOwnedSql(count));
        newestOwnedBy.set(count, statement);
      }
      return statement?.all(sessionId, userId, activeSince, activeSince);
    },
    rangeNewestFirst,
    insertSession: q(
      `INSERT INTO sessions (id, user_id, created_at, last_activity_at, metadata) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (id) DO NOTHING`,
    ),
    sessionExists: db
      .prepare<unknown[], number>("SELECT 1 FROM sessions WHERE id = ?")
      .pluck() as SqliteStatement<number>,
    getSession: q<SessionRow>(`SELECT ${SESSION_COLUMNS} FROM sessions WHERE id = ?`),
    /** The session and its state in one row, for opening a turn. */
    getSessionWithState: q<SessionRow & StateRow>(
      `SELECT ${SESSION_COLUMNS}, state_version, state FROM sessions WHERE id = ?`,
    ),
    /** What an owner-scoped call checks. */
    owner: q<{ userId: string; lastActivityAt: number; createdAt: number }>(
      `SELECT user_id AS userId, ${ACTIVITY} AS lastActivityAt, created_at AS createdAt FROM sessions WHERE id = ?`,
    ),
    // The index orders by the hour of the last activity, and the hour follows the time, so ordering by
    // it first changes nothing: SQLite walks the index and sorts within each hour.
    listFirst: q<SessionRow>(
      `SELECT ${SESSION_COLUMNS} FROM sessions WHERE user_id = ?
       ORDER BY active_hour DESC, ${ACTIVITY} DESC, id DESC LIMIT ?`,
    ),
    /** After a cursor: `user_id, last_activity_at, id, limit`. */
    listAfter: {
      all: (userId: string, lastActivityAt: number, id: string, limit: number) =>
        listAfter.all(userId, hourOf(lastActivityAt), lastActivityAt, id, limit),
    },
    listAll: q<SessionRow>(`SELECT ${SESSION_COLUMNS} FROM sessions WHERE id > ? ORDER BY id LIMIT ?`),
    deleteSession: q("DELETE FROM sessions WHERE id = ?"),
    deleteAllMessages: q("DELETE FROM messages WHERE session_id = ?"),
    deleteSummaries: q("DELETE FROM summaries WHERE session_id = ?"),
    deleteQuarantine: q("DELETE FROM quarantine WHERE session_id = ?"),
    /** Sessions last active before a time, at most `limit`. */
    inactiveSessions: {
      all: (olderThan: number, limit: number) => inactiveSessions.all(hourOf(olderThan), olderThan, olderThan, limit),
    },
    /**
     * Sets the row's activity (`at, id`) as the session's exact one: the messages it holds now stop
     * counting (activity_seq), so a past time holds, and a later append's messages count again.
     */
    touch: q(
      `UPDATE sessions SET last_activity_at = ?, activity_seq = coalesce(
         (SELECT seq FROM messages WHERE session_id = sessions.id ORDER BY seq DESC LIMIT 1), 0) WHERE id = ?`,
    ),
    /** The session's exact last activity, for a write that removes messages to keep it. */
    activity: db
      .prepare<unknown[], number>(`SELECT ${ACTIVITY} FROM sessions WHERE id = ?`)
      .pluck() as SqliteStatement<number>,
    setMetadata: q("UPDATE sessions SET metadata = ? WHERE id = ?"),

    /**
     * An append's first step, one read: the session's head (see {@link AppendHeadRow}), or nothing when
     * there is no such session: `id`.
     */
    appendHead: db
      .prepare<unknown[], AppendHeadRow>(`SELECT ${APPEND_HEAD} FROM sessions WHERE id = ?`)
      .raw() as SqliteStatement<AppendHeadRow>,
    /**
     * The same, owner-scoped: only a session of this owner active since a time (the owner check in the
     * append's own read): `id, user_id, active_since, active_since`.
     */
    appendHeadOwned: db
      .prepare<unknown[], AppendHeadRow>(
        `SELECT ${APPEND_HEAD} FROM sessions WHERE id = ? AND user_id = ? AND ${ACTIVE_SINCE}`,
      )
      .raw() as SqliteStatement<AppendHeadRow>,
    /**
     * After an append that moves the row's activity (a new hour, a row ahead of now, or an append of
     * no messages, which only touches): `now, last seq, key`.
     */
    touchAppended: q("UPDATE sessions SET last_activity_at = ?, activity_seq = ? WHERE key = ?"),
    /**
     * After an append whose new seqs are not above what the full-text index has of the session (seqs
     * used again after a pop or a truncation): the index takes them from `first seq - 1` on, and the
     * row, written anyway, takes the activity: `now, last seq, first seq - 1, key`.
     */
    appendedBelowIndexed: q(
      "UPDATE sessions SET last_activity_at = ?, activity_seq = ?, fts_seq = min(fts_seq, ?) WHERE key = ?",
    ),
    /** Puts a session in the indexer's queue (nothing when it is there): `key`. */
    queueForIndex: q("INSERT OR IGNORE INTO fts_queue (key) VALUES (?)"),
    lastSeq: q<{ seq: number }>("SELECT seq FROM messages WHERE session_id = ? ORDER BY seq DESC LIMIT 1"),
    firstSeq: db
      .prepare<unknown[], number>("SELECT seq FROM messages WHERE session_id = ? ORDER BY seq LIMIT 1")
      .pluck() as SqliteStatement<number>,
    insertMessage: q("INSERT INTO messages (session_id, seq, created_at, body) VALUES (?, ?, ?, ?)"),
    // Drops everything older than the newest `?` messages; robust to gaps a quarantine leaves.
    capMessages: q(
      `DELETE FROM messages WHERE session_id = ? AND seq <= (
         SELECT seq FROM messages WHERE session_id = ? ORDER BY seq DESC LIMIT 1 OFFSET ?)`,
    ),
    // The same, but nothing past the furthest seq a summary reaches (keepUnsummarized): min() is
    // null, and nothing is deleted, when the session has no more than `?` messages.
    capSummarized: q(
      `DELETE FROM messages WHERE session_id = ? AND seq <= min(
         (SELECT seq FROM messages WHERE session_id = ? ORDER BY seq DESC LIMIT 1 OFFSET ?),
         (SELECT coalesce(max(to_seq), 0) FROM summaries WHERE session_id = ?))`,
    ),
    rangeOldestFirst: rows(
      `SELECT ${MESSAGE_COLUMNS} FROM messages m WHERE m.session_id = ? AND m.seq BETWEEN ? AND ?
       ORDER BY m.seq LIMIT ?`,
    ),
    countMessages: q<{ n: number }>("SELECT count(*) AS n FROM messages WHERE session_id = ?"),
    /** A message's stored JSON, for a put-off quarantine to check it is still the one read. */
    messageBody: db
      .prepare<unknown[], string>("SELECT body FROM messages WHERE session_id = ? AND seq = ?")
      .pluck() as SqliteStatement<string>,
    deleteMessage: q("DELETE FROM messages WHERE session_id = ? AND seq = ?"),
    truncateAfter: q("DELETE FROM messages WHERE session_id = ? AND seq > ?"),

    nextSummaryId: q<{ next: number }>("SELECT coalesce(max(id), 0) + 1 AS next FROM summaries WHERE session_id = ?"),
    insertSummary: q(
      `INSERT INTO summaries (session_id, id, from_seq, to_seq, content, created_at, metadata)
       VALUES (?, ?, ?, ?, ?, ?, ?)`,
    ),
    listSummaries: q<SummaryRow>(
      `SELECT id, from_seq, to_seq, content, created_at, metadata FROM summaries WHERE session_id = ?
       ORDER BY from_seq, id`,
    ),
    deleteSummary: q("DELETE FROM summaries WHERE session_id = ? AND id = ?"),

    getState: q<StateRow>("SELECT state_version, state FROM sessions WHERE id = ?"),
    setState: q("UPDATE sessions SET state = ?, state_version = state_version + 1 WHERE id = ? AND state_version = ?"),
    resetState: q("UPDATE sessions SET state = '{}' WHERE id = ?"),

    quarantine: q("INSERT INTO quarantine (session_id, seq, record, raw, reason, at) VALUES (?, ?, ?, ?, ?, ?)"),
  };
}

/** The statements of one open database. */
export type SqliteStatements = ReturnType<typeof prepareStatements>;
