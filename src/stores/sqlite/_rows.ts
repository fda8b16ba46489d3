/**
 * The shapes of what the SQLite store writes and reads back: rows, encoded messages, and the part of a
 * prepared statement it uses. The statements (`_statements.ts`, `_search-statements.ts`) and the
 * store's parts share them.
 */

/** A message ready to insert: its stored JSON (the full-text indexer reads its text from it later). */
export type EncodedMessage = string;

/** A `sessions` row as read back. */
export interface SessionRow {
  id: string;
  user_id: string;
  created_at: number;
  last_activity_at: number;
  metadata: string;
}

/** A session's state columns. */
export interface StateRow {
  state_version: number;
  state: string;
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

/**
 * The part of a better-sqlite3 prepared statement the store uses, named here because the driver's own
 * statement type cannot be named in emitted declarations.
 */
export interface SqliteStatement<Row = unknown> {
  run(...params: unknown[]): { changes: number };
  get(...params: unknown[]): Row | undefined;
  all(...params: unknown[]): Row[];
}
