/**
 * SQLite schema version 8: an append writes two pages of log (its message row and its session row) where
 * it wrote about nine. The search text is no longer stored apart: the indexer reads it from the message
 * body (the SQL function threadkeep_search_text, registered by the store). Instead of a queue row per
 * message, each session says how far it is indexed (fts_seq: every message at or below it is in the index,
 * none above) and whether messages wait (fts_pending, found through a partial index that changes once per
 * session and indexing run, not per append). A message's full-text rowid is its session's key times 2^32
 * plus its seq, so a delete needs no lookup table; AUTOINCREMENT keeps a deleted session's key from coming
 * back. The activity indexes hold the hour of the last activity (active_hour, kept by triggers), not the
 * time itself: an append moves them once an hour, not every time; listing and expiry order and filter by
 * the exact time within the hour. The sessions table is rebuilt for its integer key; every session is
 * marked pending, so the index is rebuilt from the messages.
 * Released: never edited, not even its indentation; a change is a new version.
 */
export const leanAppend = `
  DROP TRIGGER messages_text_delete;
  DROP TRIGGER message_text_insert;
  DROP TRIGGER message_text_delete;
  DROP TABLE messages_fts;
  DROP TABLE fts_pending;
  DROP TABLE message_text;
  CREATE TABLE sessions_v8 (
    key INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    user_id TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    last_activity_at INTEGER NOT NULL,
    active_hour INTEGER,
    metadata TEXT NOT NULL DEFAULT '{}',
    state_version INTEGER NOT NULL DEFAULT 0,
    state TEXT NOT NULL DEFAULT '{}',
    fts_seq INTEGER NOT NULL DEFAULT 0,
    fts_pending INTEGER NOT NULL DEFAULT 0
  );
  INSERT INTO sessions_v8 (id, user_id, created_at, last_activity_at, active_hour, metadata, state_version, state, fts_pending)
    SELECT id, user_id, created_at, last_activity_at, CAST(last_activity_at AS INTEGER) / 3600000, metadata, state_version, state, 1
    FROM sessions ORDER BY rowid;
  DROP TABLE sessions;
  ALTER TABLE sessions_v8 RENAME TO sessions;
  CREATE INDEX sessions_by_owner ON sessions (user_id, active_hour);
  CREATE INDEX sessions_by_activity ON sessions (active_hour);
  CREATE INDEX sessions_unindexed ON sessions (fts_pending) WHERE fts_pending = 1;
  CREATE TRIGGER sessions_hour_insert AFTER INSERT ON sessions
    WHEN new.active_hour IS NOT CAST(new.last_activity_at AS INTEGER) / 3600000 BEGIN
    UPDATE sessions SET active_hour = CAST(new.last_activity_at AS INTEGER) / 3600000 WHERE key = new.key;
  END;
  CREATE TRIGGER sessions_hour_update AFTER UPDATE OF last_activity_at ON sessions
    WHEN new.active_hour IS NOT CAST(new.last_activity_at AS INTEGER) / 3600000 BEGIN
    UPDATE sessions SET active_hour = CAST(new.last_activity_at AS INTEGER) / 3600000 WHERE key = new.key;
  END;
  CREATE VIRTUAL TABLE messages_fts USING fts5(
    search_text, scope, content='', contentless_delete=1, tokenize='porter unicode61 remove_diacritics 2'
  );
  -- Only an indexed message (at or below its session's fts_seq) has a row to delete.
  CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
    DELETE FROM messages_fts WHERE rowid = (
      SELECT key * 4294967296 + old.seq FROM sessions WHERE id = old.session_id AND fts_seq >= old.seq);
  END;
  `;
