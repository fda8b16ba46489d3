/**
 * SQLite schema version 3: the full-text index stems English words (FTS5's porter tokenizer over unicode61
 * without diacritics): "grocery" finds "groceries". Rebuilt from message_text through fts_pending.
 * Released: never edited, not even its indentation; a change is a new version.
 */
export const porterStemming = `
  DROP TRIGGER message_text_delete;
  DROP TABLE messages_fts;
  CREATE VIRTUAL TABLE messages_fts USING fts5(
    search_text, content='message_text', content_rowid='id', tokenize='porter unicode61 remove_diacritics 2'
  );
  CREATE TRIGGER message_text_delete AFTER DELETE ON message_text BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, search_text)
      SELECT 'delete', old.id, old.search_text WHERE NOT EXISTS (SELECT 1 FROM fts_pending WHERE id = old.id);
    DELETE FROM fts_pending WHERE id = old.id;
  END;
  DELETE FROM fts_pending;
  INSERT INTO fts_pending (id) SELECT id FROM message_text;
  `;
