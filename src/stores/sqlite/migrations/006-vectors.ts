/**
 * SQLite schema version 6: message embeddings (packed little-endian float32, normalised), one per message,
 * and the dimensions of each embedding model so vectors of mixed sizes are refused.
 * Released: never edited, not even its indentation; a change is a new version.
 */
export const messageVectors = `
  CREATE TABLE message_vectors (
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    model TEXT NOT NULL,
    vector BLOB NOT NULL,
    PRIMARY KEY (session_id, seq)
  ) WITHOUT ROWID;
  CREATE TABLE embedding_models (model TEXT PRIMARY KEY, dims INTEGER NOT NULL);
  CREATE TRIGGER messages_vector_delete AFTER DELETE ON messages BEGIN
    DELETE FROM message_vectors WHERE session_id = old.session_id AND seq = old.seq;
  END;
  `;
