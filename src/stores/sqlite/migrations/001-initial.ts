/**
 * SQLite schema version 1: sessions, messages, summaries.
 * Released: never edited, not even its indentation; a change is a new version.
 */
export const initialSchema = `
  CREATE TABLE sessions (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    last_activity_at INTEGER NOT NULL,
    metadata TEXT NOT NULL DEFAULT '{}',
    state_version INTEGER NOT NULL DEFAULT 0,
    state TEXT NOT NULL DEFAULT '{}'
  );
  CREATE INDEX sessions_by_owner ON sessions (user_id, last_activity_at DESC, id DESC);
  CREATE INDEX sessions_by_activity ON sessions (last_activity_at);
  -- Clustered on (session_id, seq): a session's messages sit together however appends of many
  -- sessions interleave, so the context window is one short range read.
  CREATE TABLE messages (
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
  ) WITHOUT ROWID;
  -- The lowercased searchable text, apart so message rows stay small; its id keys the full-text index.
  CREATE TABLE message_text (
    id INTEGER PRIMARY KEY,
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    search_text TEXT NOT NULL,
    UNIQUE (session_id, seq)
  );
  CREATE TRIGGER messages_text_delete AFTER DELETE ON messages BEGIN
    DELETE FROM message_text WHERE session_id = old.session_id AND seq = old.seq;
  END;
  CREATE TABLE summaries (
    session_id TEXT NOT NULL,
    id INTEGER NOT NULL,
    from_seq INTEGER NOT NULL,
    to_seq INTEGER NOT NULL,
    content TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    metadata TEXT,
    PRIMARY KEY (session_id, id)
  );
  `;
