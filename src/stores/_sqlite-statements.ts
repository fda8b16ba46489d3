/**
 * The SQLite store's prepared statements, made once per open database, and the row shapes they return.
 */
import type Database from "better-sqlite3";
import { scopeSql } from "./_sqlite-fulltext.js";

/** A `sessions` row as read back. */
export interface SessionRow {
  id: string;
  user_id: string;
  created_at: number;
  last_activity_at: number;
  metadata: string;
}

/**
 * A `messages` row, read in raw (array) mode: building no object per row is a measurable share of
 * "load last 20". `sessionId` is there only where the query spans sessions (search).
 */
export type MessageRow = [seq: number, createdAt: number, body: string, sessionId?: string];

/** A `summaries` row as read back. */
export interface SummaryRow {
  id: number;
  from_seq: number;
  to_seq: number;
  content: string;
  created_at: number;
  metadata: string | null;
}

const SESSION_COLUMNS = "id, user_id, created_at, last_activity_at, metadata";
const MESSAGE_COLUMNS = "m.seq, m.created_at, m.body";
const HIT_COLUMNS = "m.seq, m.created_at, m.body, m.session_id";
const HIT_JOIN = "JOIN messages m ON m.session_id = t.session_id AND m.seq = t.seq";
/** How many "last N" statements with a literal LIMIT are kept; callers use a handful of window sizes. */
const NEWEST_CACHE = 16;
// bm25 weighs the message column only: the scope tokens are a filter, not a match.
const RELEVANCE = "bm25(messages_fts, 1.0, 0.0)";
// Newest first, as the contract orders search hits.
const SEARCH_ORDER = "ORDER BY m.created_at DESC, m.seq DESC LIMIT ?";

/** The read of a session's newest `count` messages (the context window), newest first. */
export const newestMessagesSql = (count: number) =>
  `SELECT ${MESSAGE_COLUMNS} FROM messages m WHERE m.session_id = ? ORDER BY m.seq DESC LIMIT ${count}`;

/**
 * The same read of a session of this owner active since a time: `session_id, user_id, active_since`.
 * No row when there is no such session, or when it has no messages (the caller tells them apart).
 */
export const newestOwnedSql = (count: number) =>
  `SELECT ${MESSAGE_COLUMNS} FROM messages m WHERE m.session_id = (
     SELECT id FROM sessions WHERE id = ? AND user_id = ? AND last_activity_at >= ?)
   ORDER BY m.seq DESC LIMIT ${count}`;

/** The same read within seq bounds: `session_id, from, to, limit`. */
export const RANGE_NEWEST_FIRST_SQL = `SELECT ${MESSAGE_COLUMNS} FROM messages m
  WHERE m.session_id = ? AND m.seq BETWEEN ? AND ? ORDER BY m.seq DESC LIMIT ?`;

/**
 * The part of a better-sqlite3 prepared statement the store uses, named here because the driver's own
 * statement type cannot be named in emitted declarations.
 */
export interface SqliteStatement<Row = unknown> {
  run(...params: unknown[]): { changes: number };
  get(...params: unknown[]): Row | undefined;
  all(...params: unknown[]): Row[];
}

/** What an append reads before it writes, in one row: the session's owner and activity, its last and first seq. */
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
  options: { maxMessages?: number; keepUnsummarized?: boolean },
): void {
  const max = options.maxMessages ?? 0;
  if (max <= 0 || lastSeq - firstSeq + 1 <= max) return;
  if (options.keepUnsummarized) st.capSummarized.run(id, id, max, id);
  else st.capMessages.run(id, id, max);
}

export type AppendHeadRow = [userId: string, lastActivityAt: number, lastSeq: number | null, firstSeq: number | null];

/** Prepares every statement the store runs. */
export function prepareStatements(db: Database.Database) {
  const q = <Row = unknown>(sql: string): SqliteStatement<Row> => db.prepare<unknown[], Row>(sql);
  const rows = (sql: string): SqliteStatement<MessageRow> => db.prepare<unknown[], MessageRow>(sql).raw();
  const newestBy = new Map<number, SqliteStatement<MessageRow>>();
  const newestOwnedBy = new Map<number, SqliteStatement<MessageRow>>();
  const rangeNewestFirst = rows(RANGE_NEWEST_FIRST_SQL);
  return {
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
      return statement?.all(sessionId, userId, activeSince);
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
    /** What an owner-scoped call checks. */
    owner: q<{ userId: string; lastActivityAt: number }>("SELECT user_id AS userId, last_activity_at AS lastActivityAt FROM sessions WHERE id = ?"),
    listFirst: q<SessionRow>(
      `SELECT ${SESSION_COLUMNS} FROM sessions WHERE user_id = ?
       ORDER BY last_activity_at DESC, id DESC LIMIT ?`,
    ),
    listAfter: q<SessionRow>(
      `SELECT ${SESSION_COLUMNS} FROM sessions WHERE user_id = ? AND (last_activity_at, id) < (?, ?)
       ORDER BY last_activity_at DESC, id DESC LIMIT ?`,
    ),
    listAll: q<SessionRow>(`SELECT ${SESSION_COLUMNS} FROM sessions WHERE id > ? ORDER BY id LIMIT ?`),
    deleteSession: q("DELETE FROM sessions WHERE id = ?"),
    deleteMessages: q("DELETE FROM messages WHERE session_id = ?"),
    deleteSummaries: q("DELETE FROM summaries WHERE session_id = ?"),
    deleteQuarantine: q("DELETE FROM quarantine WHERE session_id = ?"),
    inactiveSessions: q<{ id: string }>("SELECT id FROM sessions WHERE last_activity_at < ?"),
    touch: q("UPDATE sessions SET last_activity_at = ? WHERE id = ?"),
    setMetadata: q("UPDATE sessions SET metadata = ? WHERE id = ?"),

    /** One read for an append, where three statements (owner, last seq, first seq) cost a third of its reads' time. */
    appendHead: db
      .prepare<unknown[], AppendHeadRow>(
        `SELECT s.user_id, s.last_activity_at,
           (SELECT seq FROM messages WHERE session_id = s.id ORDER BY seq DESC LIMIT 1),
           (SELECT seq FROM messages WHERE session_id = s.id ORDER BY seq LIMIT 1)
         FROM sessions s WHERE s.id = ?`,
      )
      .raw() as SqliteStatement<AppendHeadRow>,
    lastSeq: q<{ seq: number }>("SELECT seq FROM messages WHERE session_id = ? ORDER BY seq DESC LIMIT 1"),
    firstSeq: db
      .prepare<unknown[], number>("SELECT seq FROM messages WHERE session_id = ? ORDER BY seq LIMIT 1")
      .pluck() as SqliteStatement<number>,
    insertMessage: q("INSERT INTO messages (session_id, seq, created_at, body) VALUES (?, ?, ?, ?)"),
    insertText: q("INSERT INTO message_text (session_id, seq, search_text) VALUES (?, ?, ?)"),
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
    deleteMessage: q("DELETE FROM messages WHERE session_id = ? AND seq = ?"),
    truncateAfter: q("DELETE FROM messages WHERE session_id = ? AND seq > ?"),

    nextSummaryId: q<{ next: number }>(
      "SELECT coalesce(max(id), 0) + 1 AS next FROM summaries WHERE session_id = ?",
    ),
    insertSummary: q(
      `INSERT INTO summaries (session_id, id, from_seq, to_seq, content, created_at, metadata)
       VALUES (?, ?, ?, ?, ?, ?, ?)`,
    ),
    listSummaries: q<SummaryRow>(
      `SELECT id, from_seq, to_seq, content, created_at, metadata FROM summaries WHERE session_id = ?
       ORDER BY from_seq, id`,
    ),
    deleteSummary: q("DELETE FROM summaries WHERE session_id = ? AND id = ?"),

    getState: q<{ state_version: number; state: string }>(
      "SELECT state_version, state FROM sessions WHERE id = ?",
    ),
    setState: q(
      "UPDATE sessions SET state = ?, state_version = state_version + 1 WHERE id = ? AND state_version = ?",
    ),
    resetState: q("UPDATE sessions SET state = '{}' WHERE id = ?"),

    searchSubstring: rows(
      `SELECT ${HIT_COLUMNS} FROM message_text t JOIN sessions s ON s.id = t.session_id ${HIT_JOIN}
       WHERE s.user_id = ? AND instr(t.search_text, ?) > 0 ${SEARCH_ORDER}`,
    ),
    searchSubstringInSession: rows(
      `SELECT ${HIT_COLUMNS} FROM message_text t JOIN sessions s ON s.id = t.session_id ${HIT_JOIN}
       WHERE t.session_id = ? AND s.user_id = ? AND instr(t.search_text, ?) > 0 ${SEARCH_ORDER}`,
    ),
    // The MATCH carries the owner's (and session's) scope tokens; the joins check the owner again.
    searchFullText: rows(
      `SELECT ${HIT_COLUMNS} FROM messages_fts f JOIN message_text t ON t.id = f.rowid
       JOIN sessions s ON s.id = t.session_id ${HIT_JOIN}
       WHERE messages_fts MATCH ? AND s.user_id = ? ${SEARCH_ORDER}`,
    ),
    searchFullTextInSession: rows(
      `SELECT ${HIT_COLUMNS} FROM messages_fts f JOIN message_text t ON t.id = f.rowid
       JOIN sessions s ON s.id = t.session_id ${HIT_JOIN}
       WHERE messages_fts MATCH ? AND t.session_id = ? AND s.user_id = ? ${SEARCH_ORDER}`,
    ),
    // Relevance order (bm25 of the message column, best first) for ranked searches; the query ORs its words.
    searchFullTextRanked: rows(
      `SELECT ${HIT_COLUMNS} FROM messages_fts f JOIN message_text t ON t.id = f.rowid
       JOIN sessions s ON s.id = t.session_id ${HIT_JOIN}
       WHERE messages_fts MATCH ? AND s.user_id = ? ORDER BY ${RELEVANCE}, m.seq DESC LIMIT ?`,
    ),
    searchFullTextRankedInSession: rows(
      `SELECT ${HIT_COLUMNS} FROM messages_fts f JOIN message_text t ON t.id = f.rowid
       JOIN sessions s ON s.id = t.session_id ${HIT_JOIN}
       WHERE messages_fts MATCH ? AND t.session_id = ? AND s.user_id = ? ORDER BY ${RELEVANCE}, m.seq DESC LIMIT ?`,
    ),
    hasPending: db
      .prepare<unknown[], number>("SELECT 1 FROM fts_pending LIMIT 1")
      .pluck() as SqliteStatement<number>,
    /** The id that ends the oldest `?` pending rows (a chunk of the queue). */
    pendingChunkEnd: db
      .prepare<unknown[], number | null>("SELECT max(id) FROM (SELECT id FROM fts_pending ORDER BY id LIMIT ?)")
      .pluck() as SqliteStatement<number | null>,
    indexPending: q(
      `INSERT INTO messages_fts (rowid, search_text, scope)
       SELECT t.id, t.search_text, ${scopeSql("s.user_id", "t.session_id")}
       FROM fts_pending p JOIN message_text t ON t.id = p.id JOIN sessions s ON s.id = t.session_id
       WHERE p.id <= ?`,
    ),
    clearPending: q("DELETE FROM fts_pending WHERE id <= ?"),

    quarantine: q(
      "INSERT INTO quarantine (session_id, seq, record, raw, reason, at) VALUES (?, ?, ?, ?, ?, ?)",
    ),
  };
}

/** The statements of one open database. */
export type SqliteStatements = ReturnType<typeof prepareStatements>;
