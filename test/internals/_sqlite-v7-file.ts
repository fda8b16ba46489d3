/**
 * Writes a SQLite file at schema v7 (search text in `message_text`, a full-text queue in
 * `fts_pending`), as a process of that version left it, for the upgrade tests: the current store
 * opening it leaves every message waiting for the full-text index.
 */
import type Database from "better-sqlite3";
import { openSqliteDatabase } from "../../src/stores/sqlite/_schema.js";

/** A v7 file being written; {@link SqliteV7File.close} it before a store opens the path. */
export interface SqliteV7File {
  /** The raw database, for what the builder does not write (e.g. filling the v7 full-text index). */
  db: Database.Database;
  /** A session created at 1 ms, last active at `lastActivityAt`. */
  session(id: string, userId: string, lastActivityAt?: number): void;
  /** A user message with its search text, lowercased as v7 wrote it. */
  message(sessionId: string, seq: number, content: string): void;
  /** Runs `fn` in one transaction (a large file is written in seconds, not minutes). */
  transaction(fn: () => void): void;
  close(): void;
}

/** Opens (creating) a schema v7 file at `path`. */
export function sqliteV7File(path: string): SqliteV7File {
  const db = openSqliteDatabase({ path, busyTimeoutMs: 100, synchronous: "normal", targetVersion: 7 });
  const session = db.prepare("INSERT INTO sessions (id, user_id, created_at, last_activity_at) VALUES (?, ?, 1, ?)");
  const message = db.prepare("INSERT INTO messages (session_id, seq, created_at, body) VALUES (?, ?, 1, ?)");
  const text = db.prepare("INSERT INTO message_text (session_id, seq, search_text) VALUES (?, ?, ?)");
  return {
    db,
    session: (id, userId, lastActivityAt = 1) => void session.run(id, userId, lastActivityAt),
    message: (sessionId, seq, content) => {
      message.run(sessionId, seq, JSON.stringify({ role: "user", content }));
      text.run(sessionId, seq, content.toLowerCase());
    },
    transaction: (fn) => db.transaction(fn)(),
    close: () => db.close(),
  };
}
