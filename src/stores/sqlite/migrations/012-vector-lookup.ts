/**
 * SQLite schema version 12: which messages of a session lack a current vector is read from a narrow
 * index of the vectors' keys, model and time, not from the vectors' rows (3 KB at 768 dimensions, so
 * about one a page): the background embedder asks before every round, and at 12,000 embedded messages
 * the lookup through the rows cost ~170 ms of CPU a time, the event loop held (9 ms through this index).
 * Released: never edited, not even its indentation; a change is a new version.
 */
export const vectorLookup = `
  CREATE INDEX message_vectors_current ON message_vectors (session_id, seq, model, created_at);
  `;
