/**
 * SQLite schema version 5: branches (superseded messages kept as one JSON array each) and the ids of
 * applied idempotent writes.
 * Released: never edited, not even its indentation; a change is a new version.
 */
export const branchesAndOperations = `
  CREATE TABLE branches (
    session_id TEXT NOT NULL,
    id INTEGER NOT NULL,
    at_seq INTEGER NOT NULL,
    parent_id INTEGER,
    reason TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    metadata TEXT,
    messages TEXT NOT NULL,
    PRIMARY KEY (session_id, id)
  ) WITHOUT ROWID;
  CREATE TABLE operations (
    session_id TEXT NOT NULL,
    id TEXT NOT NULL,
    digest TEXT NOT NULL,
    from_seq INTEGER NOT NULL,
    to_seq INTEGER NOT NULL,
    at INTEGER NOT NULL,
    UNIQUE (session_id, id)
  );
  `;
