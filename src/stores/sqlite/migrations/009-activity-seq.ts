/**
 * SQLite schema version 9: an append writes one page of log (its message's leaf) where it wrote two to
 * four: the session row is no longer moved by every append. A message's created_at is the time of the
 * append that wrote it, so the newest message knows the session's last activity. The row's
 * last_activity_at is the activity as of the row's last write, and activity_seq the session's last seq
 * then: a session's exact last activity is the newer of the row's and the newest message's above
 * activity_seq (see activitySql in sqlite/_activity.ts). An append writes the row when the hour changes
 * (so active_hour, the activity indexes' key, stays the hour of the exact activity); a touch, a pop or any
 * other write that sets or keeps the activity writes it with activity_seq at the last seq, so messages
 * below it never count (a touch may set a past time). Sessions whose messages wait for the full-text index
 * are rows of fts_queue, one small table, instead of a flag in the session row and its partial index:
 * joining the queue (a session's first append after an indexing run) writes one page where the flag wrote
 * two.
 * Released: never edited, not even its indentation; a change is a new version.
 */
export const activitySeq = `
  ALTER TABLE sessions ADD COLUMN activity_seq INTEGER NOT NULL DEFAULT 0;
  UPDATE sessions SET activity_seq = coalesce(
    (SELECT seq FROM messages WHERE session_id = sessions.id ORDER BY seq DESC LIMIT 1), 0);
  CREATE TABLE fts_queue (key INTEGER PRIMARY KEY);
  INSERT INTO fts_queue (key) SELECT key FROM sessions WHERE fts_pending = 1;
  DROP INDEX sessions_unindexed;
  ALTER TABLE sessions DROP COLUMN fts_pending;
  `;
