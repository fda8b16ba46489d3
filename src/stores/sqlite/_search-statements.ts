/**
 * The SQLite store's statements for search and for the full-text index's upkeep (the indexer's queue
 * and watermarks), made once per open database with the rest (see prepareStatements).
 */
import type Database from "better-sqlite3";
import { contentText } from "../../core/messages.js";
import { activeSinceSql } from "./_activity.js";
import { scopeSql } from "./_fulltext.js";
import type { MessageRow, SqliteStatement } from "./_rows.js";

const HIT_COLUMNS = "m.seq, m.created_at, m.body, m.session_id";
/**
 * A full-text row's message: its rowid is the session's key times 2^32 plus the seq (see schema v8),
 * so both joins are primary-key lookups.
 */
const FULL_TEXT_JOIN = `JOIN sessions s ON s.key = f.rowid >> 32
  JOIN messages m ON m.session_id = s.id AND m.seq = (f.rowid & ${2 ** 32 - 1})`;
/** A message's full-text rowid, from its session's key and its seq. */
const FULL_TEXT_ROWID = (key: string, seq: string) => `${key} * ${2 ** 32} + ${seq}`;
/**
 * The searchable text of a stored message body: its text content, lowercased here because SQLite's
 * lower() folds ASCII only. A body that is not a message's JSON has none (reads quarantine it).
 */
export function searchTextOf(body: string): string {
  try {
    const message = JSON.parse(body) as { content?: unknown };
    return contentText(message?.content as never).toLowerCase();
  } catch {
    return "";
  }
}
// bm25 weighs the message column only: the scope tokens are a filter, not a match.
const RELEVANCE = "bm25(messages_fts, 1.0, 0.0)";
// Newest first, as the contract orders search hits.
const SEARCH_ORDER = "ORDER BY m.created_at DESC, m.seq DESC LIMIT ?";
// A search's seq bounds (SearchQuery.afterSeq, beforeSeq), before its order and limit: `after, before`.
const SEQ_BOUNDS = "m.seq > ? AND m.seq < ?";

/**
 * The searches, whose work grows with what they read: over one owner's sessions (no `sessionId`), or
 * over one session. The store runs them on its search thread (`sqlite/_search-reader.ts`) where it
 * has one (a session's only over a large span: `sqlite/_search.ts`), so they are kept here as SQL to
 * prepare on either connection. Arguments: the owner's substring search `user_id, since, since,
 * needle, after, before, limit` (in a session, `id` first); the owner's full-text ones `match, user_id,
 * since, since, after, before, limit` (in a session, `id` after `match`); a session's matches `match,
 * id, after, id, before, id, user_id, since, since`.
 */
export const SEARCH_SQL = {
  searchSubstring: `SELECT ${HIT_COLUMNS} FROM sessions s JOIN messages m ON m.session_id = s.id
       WHERE s.user_id = ? AND ${activeSinceSql("s")} AND instr(threadkeep_search_text(m.body), ?) > 0 AND ${SEQ_BOUNDS} ${SEARCH_ORDER}`,
  searchSubstringInSession: `SELECT ${HIT_COLUMNS} FROM sessions s JOIN messages m ON m.session_id = s.id
       WHERE s.id = ? AND s.user_id = ? AND ${activeSinceSql("s")} AND instr(threadkeep_search_text(m.body), ?) > 0 AND ${SEQ_BOUNDS} ${SEARCH_ORDER}`,
  // The MATCH carries the owner's scope token, or in one session the session's (see _fulltext.ts); the
  // joins check the owner again. Every search takes the lowest last activity of a session it reads
  // (SearchQuery.activeSince).
  searchFullText: `SELECT ${HIT_COLUMNS} FROM messages_fts f ${FULL_TEXT_JOIN}
       WHERE messages_fts MATCH ? AND s.user_id = ? AND ${activeSinceSql("s")} AND ${SEQ_BOUNDS} ${SEARCH_ORDER}`,
  searchFullTextInSession: `SELECT ${HIT_COLUMNS} FROM messages_fts f ${FULL_TEXT_JOIN}
       WHERE messages_fts MATCH ? AND s.id = ? AND s.user_id = ? AND ${activeSinceSql("s")} AND ${SEQ_BOUNDS} ${SEARCH_ORDER}`,
  // Relevance order (bm25 of the message column, best first) for ranked searches; the query ORs its words.
  searchFullTextRanked: `SELECT ${HIT_COLUMNS} FROM messages_fts f ${FULL_TEXT_JOIN}
       WHERE messages_fts MATCH ? AND s.user_id = ? AND ${activeSinceSql("s")} AND ${SEQ_BOUNDS}
       ORDER BY ${RELEVANCE}, m.seq DESC LIMIT ?`,
  // Every match of one session between two seqs (exclusive), for ranking in code (see searchMessages):
  // no bm25 here, which would read every row of the store holding each of the query's words to weigh
  // it. The seqs bound the full-text rowids (the session's key times 2^32 plus the seq), so FTS5 skips
  // what lies outside them instead of the join dropping it: `match, id, after, id, before, id,
  // user_id, since, since`.
  searchFullTextAllInSession: `SELECT ${HIT_COLUMNS} FROM messages_fts f ${FULL_TEXT_JOIN}
     WHERE messages_fts MATCH ?
       AND f.rowid > ${FULL_TEXT_ROWID("(SELECT key FROM sessions WHERE id = ?)", "?")}
       AND f.rowid < ${FULL_TEXT_ROWID("(SELECT key FROM sessions WHERE id = ?)", "?")}
       AND s.id = ? AND s.user_id = ? AND ${activeSinceSql("s")} ORDER BY m.seq`,
} as const;

/** The name of one of {@link SEARCH_SQL}'s statements. */
export type SearchStatement = keyof typeof SEARCH_SQL;

/** A session whose messages wait for the full-text index, and its last seq (null without messages). */
export interface PendingSessionRow {
  key: number;
  id: string;
  fts_seq: number;
  last_seq: number | null;
}

const PENDING_COLUMNS = `s.key, s.id, s.fts_seq,
  (SELECT seq FROM messages WHERE session_id = s.id ORDER BY seq DESC LIMIT 1) AS last_seq`;

/** One owner's sessions waiting for the full-text index, at most `?2`: `user_id, limit`. */
export const PENDING_OF_OWNER_SQL = `SELECT ${PENDING_COLUMNS} FROM fts_queue w CROSS JOIN sessions s ON s.key = w.key
  WHERE s.user_id = ? LIMIT ?`;

/**
 * Indexes, in one statement, every message above its session's fts_seq up to a seq, of the sessions a
 * JSON array of `[key, to]` pairs names: `pairs`. The pairs are the outer loop (CROSS JOIN), so each
 * session and its new messages are primary-key lookups; in the queue's (key) order, the rowids rise
 * through the statement, and FTS5 writes its pending terms out as a segment only at the commit (it
 * also does whenever a rowid is lower than the one before).
 */
export const INDEX_SESSIONS_SQL = `INSERT INTO messages_fts (rowid, search_text, scope)
  SELECT ${FULL_TEXT_ROWID("s.key", "m.seq")}, threadkeep_search_text(m.body), ${scopeSql("s.user_id", "s.id")}
  FROM json_each(?) j CROSS JOIN sessions s ON s.key = j.value ->> 0
  CROSS JOIN messages m ON m.session_id = s.id AND m.seq > s.fts_seq AND m.seq <= j.value ->> 1`;

/** Prepares the search and full-text index statements. */
export function prepareSearchStatements(db: Database.Database) {
  // The indexer and the substring search read the text from the bodies; deterministic, so SQLite may
  // evaluate it once per row.
  db.function("threadkeep_search_text", { deterministic: true }, (body: unknown) =>
    typeof body === "string" ? searchTextOf(body) : "",
  );
  const q = <Row = unknown>(sql: string): SqliteStatement<Row> => db.prepare<unknown[], Row>(sql);
  const rows = (sql: string): SqliteStatement<MessageRow> => db.prepare<unknown[], MessageRow>(sql).raw();
  const lowerIndexed = q("UPDATE sessions SET fts_seq = min(fts_seq, ?) WHERE id = ?");
  const queueSession = q("INSERT OR IGNORE INTO fts_queue (key) SELECT key FROM sessions WHERE id = ?");
  return {
    searchSubstring: rows(SEARCH_SQL.searchSubstring),
    searchSubstringInSession: rows(SEARCH_SQL.searchSubstringInSession),
    searchFullText: rows(SEARCH_SQL.searchFullText),
    searchFullTextInSession: rows(SEARCH_SQL.searchFullTextInSession),
    searchFullTextRanked: rows(SEARCH_SQL.searchFullTextRanked),
    searchFullTextAllInSession: rows(SEARCH_SQL.searchFullTextAllInSession),
    /**
     * How many seqs an owner's sessions have in the full-text index, summed over at most `limit` of
     * them (so the read stays bounded however many the owner has): `user_id, limit`.
     */
    ownerIndexedSeqs: db
      .prepare<unknown[], number>(
        "SELECT coalesce(sum(fts_seq), 0) FROM (SELECT fts_seq FROM sessions WHERE user_id = ? LIMIT ?)",
      )
      .pluck() as SqliteStatement<number>,
    /** How far a session's messages are in the full-text index (all with a seq up to it): `id`. */
    indexedTo: db
      .prepare<unknown[], number>("SELECT fts_seq FROM sessions WHERE id = ?")
      .pluck() as SqliteStatement<number>,
    /** Sessions whose messages wait for the full-text index (the indexer's queue), at most `?`. */
    pendingSessions: q<PendingSessionRow>(
      `SELECT ${PENDING_COLUMNS} FROM fts_queue w JOIN sessions s ON s.key = w.key LIMIT ?`,
    ),
    /** One owner's sessions whose messages wait, at most `?2`: `user_id, limit`. */
    // CROSS JOIN keeps the queue the outer loop: otherwise SQLite walks all the owner's sessions.
    pendingSessionsOf: q<PendingSessionRow>(PENDING_OF_OWNER_SQL),
    /** The session, when it is the owner's and messages of it wait: `id, user_id, limit` (1 is enough). */
    pendingSession: q<PendingSessionRow>(
      `SELECT ${PENDING_COLUMNS} FROM sessions s JOIN fts_queue w ON w.key = s.key WHERE s.id = ? AND s.user_id = ? LIMIT ?`,
    ),
    /** Takes a session that is being deleted out of the indexer's queue: `id`. */
    dequeueSession: q("DELETE FROM fts_queue WHERE key = (SELECT key FROM sessions WHERE id = ?)"),
    /**
     * The seq that ends a session's next `?` unindexed messages (null when none waits), and how many
     * they are: `session_id, fts_seq, limit`.
     */
    pendingEnd: db
      .prepare<unknown[], [end: number | null, count: number]>(
        "SELECT max(seq), count(*) FROM (SELECT seq FROM messages WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?)",
      )
      .raw() as SqliteStatement<[end: number | null, count: number]>,
    /** {@link INDEX_SESSIONS_SQL}: `pairs`, a JSON array of `[key, to]`. */
    indexSessions: q(INDEX_SESSIONS_SQL),
    /** Records how far each session of a JSON array of `[key, to]` pairs is indexed: `pairs`. */
    indexedToEach: q(
      "UPDATE sessions SET fts_seq = j.value ->> 1 FROM json_each(?) j WHERE sessions.key = j.value ->> 0",
    ),
    /** Takes the sessions of a JSON array of keys out of the indexer's queue: `keys`. */
    dequeueEach: q("DELETE FROM fts_queue WHERE key IN (SELECT value FROM json_each(?))"),
    /**
     * After messages were inserted from seq `first` on: puts the session in the indexer's queue, and
     * lowers how far the index has it when the new seqs are not above it (after a truncation):
     * `first seq - 1, id`.
     */
    markUnindexed: {
      run(firstSeqMinusOne: number, id: string) {
        lowerIndexed.run(firstSeqMinusOne, id);
        queueSession.run(id);
      },
    },
  };
}
