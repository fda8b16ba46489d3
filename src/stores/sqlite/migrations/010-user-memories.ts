/**
 * SQLite schema version 10: memories about users (issue 25). One row a memory, keyed by its user and
 * id, so another user's id is simply not there; the earlier texts are a JSON array in the row, gone
 * with it. The listing index serves one user's memories newest first.
 * Released: never edited, not even its indentation; a change is a new version.
 */
export const userMemories = `
  CREATE TABLE user_memories (
    user_id TEXT NOT NULL,
    id TEXT NOT NULL,
    text TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    source TEXT NOT NULL,
    metadata TEXT NOT NULL,
    history TEXT NOT NULL,
    PRIMARY KEY (user_id, id)
  ) WITHOUT ROWID;
  CREATE INDEX user_memories_listing ON user_memories (user_id, updated_at DESC, id DESC);
  `;
