/**
 * SQLite schema version 7: the full-text index carries each message's owner and session as tokens of a
 * second column (see sqlite/_fulltext.ts), so a search matches one owner's rows inside FTS5 instead of
 * ranking every owner's matches first. Contentless, with deletes by rowid: the scope is computed when the
 * text is indexed, and a delete needs nothing but the rowid (no copy of the owner per message). Rebuilt
 * from message_text through fts_pending.
 * Released: never edited, not even its indentation; a change is a new version.
 */
export const scopedFullText = `
  DROP TRIGGER message_text_delete;
  DROP TABLE messages_fts;
  CREATE VIRTUAL TABLE messages_fts USING fts5(
    search_text, scope, content='', contentless_delete=1, tokenize='porter unicode61 remove_diacritics 2'
  );
  CREATE TRIGGER message_text_delete AFTER DELETE ON message_text BEGIN
    DELETE FROM messages_fts WHERE rowid = old.id AND NOT EXISTS (SELECT 1 FROM fts_pending WHERE id = old.id);
    DELETE FROM fts_pending WHERE id = old.id;
  END;
  DELETE FROM fts_pending;
  INSERT INTO fts_pending (id) SELECT id FROM message_text;
  `;
