/**
 * SQLite schema version 11: embeddings of memories about users. A memory's vector (float32, normalised)
 * and its model sit in the memory's own row, so they go with it; an update that changes the text
 * clears them until the memory is embedded again. Listings name their columns and never read them.
 * Released: never edited, not even its indentation; a change is a new version.
 */
export const memoryVectors = `
  ALTER TABLE user_memories ADD COLUMN embedding_model TEXT;
  ALTER TABLE user_memories ADD COLUMN embedding BLOB;
  `;
