/**
 * SQLite schema version 4: turn leases in the file, for processes sharing it (used with the store's
 * crossProcessLease). One fence counter for all sessions, so forgetting a session's lease row never reuses
 * a fence.
 * Released: never edited, not even its indentation; a change is a new version.
 */
export const turnLeases = `
  CREATE TABLE turn_leases (
    session_id TEXT PRIMARY KEY,
    fence INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
  );
  CREATE TABLE turn_queue (
    ticket INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL,
    alive_until INTEGER NOT NULL
  );
  CREATE INDEX turn_queue_by_session ON turn_queue (session_id, ticket);
  CREATE TABLE turn_fence (id INTEGER PRIMARY KEY CHECK (id = 1), next INTEGER NOT NULL);
  INSERT INTO turn_fence (id, next) VALUES (1, 1);
  `;
