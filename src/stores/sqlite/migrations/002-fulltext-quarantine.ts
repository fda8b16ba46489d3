/**
 * SQLite schema version 2: the full-text index and the quarantine of corrupt records. New text waits in
 * fts_pending and is indexed in batches (see indexPending): indexing each append alone costs more than the
 * append.
 * Released: never edited, not even its indentation; a change is a new version.
 */
export const fullTextAndQuarantine = `
  CREATE VIRTUAL TABLE messages_fts USING fts5(search_text, content='message_text', content_rowid='id');
  CREATE TABLE fts_pending (id INTEGER PRIMARY KEY);
  CREATE TRIGGER message_text_insert AFTER INSERT ON message_text BEGIN
    INSERT INTO fts_pending (id) VALUES (new.id);
  END;
  -- Only text that reached the index may be deleted from it: the external-content 'delete' must
  -- repeat exactly what was indexed.
  CREATE TRIGGER message_text_delete AFTER DELETE ON message_text BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, search_text)
      SELECT 'delete', old.id, old.search_text WHERE NOT EXISTS (SELECT 1 FROM fts_pending WHERE id = old.id);
    DELETE FROM fts_pending WHERE id = old.id;
  END;
  INSERT INTO fts_pending (id) SELECT id FROM message_text;
  CREATE TABLE quarantine (
    id INTEGER PRIMARY KEY,
    session_id TEXT,
    seq INTEGER,
    record TEXT NOT NULL,
    raw TEXT,
    reason TEXT NOT NULL,
    at INTEGER NOT NULL
  );
  CREATE INDEX quarantine_by_session ON quarantine (session_id);
  `;
