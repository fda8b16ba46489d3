/**
 * The SQLite store's schema and its forward migrations. The schema version lives in
 * `PRAGMA user_version`; migration `i` takes a database from version `i` to `i + 1`.
 */
import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import Database from "better-sqlite3";
import { ThreadkeepError } from "../../core/errors.js";

/** One forward step of the schema. Never edit a released step: add a new one. */
export const SQLITE_MIGRATIONS: readonly string[] = [
  // v1: sessions, messages, summaries.
  `
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
  `,
  // v2: the full-text index and the quarantine of corrupt records. New text waits in fts_pending and
  // is indexed in batches (see indexPending): indexing each append alone costs more than the append.
  `
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
  `,
  // v3: the full-text index stems English words (FTS5's porter tokenizer over unicode61 without
  // diacritics): "grocery" finds "groceries". Rebuilt from message_text through fts_pending.
  `
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
  `,
  // v4: turn leases in the file, for processes sharing it (used with the store's crossProcessLease).
  // One fence counter for all sessions, so forgetting a session's lease row never reuses a fence.
  `
  CREATE TABLE turn_leases (
    session_id TEXT PRIMARY KEY,
    fence INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
  );
  CREATE TABLE turn_queue (
    ticket INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL,
    alive_until INTEGER NOT NULL
  );
  CREATE INDEX turn_queue_by_session ON turn_queue (session_id, ticket);
  CREATE TABLE turn_fence (id INTEGER PRIMARY KEY CHECK (id = 1), next INTEGER NOT NULL);
  INSERT INTO turn_fence (id, next) VALUES (1, 1);
  `,
  // v5: branches (superseded messages kept as one JSON array each) and the ids of applied idempotent writes.
  `
  CREATE TABLE branches (
    session_id TEXT NOT NULL,
    id INTEGER NOT NULL,
    at_seq INTEGER NOT NULL,
    parent_id INTEGER,
    reason TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    metadata TEXT,
    messages TEXT NOT NULL,
    PRIMARY KEY (session_id, id)
  ) WITHOUT ROWID;
  CREATE TABLE operations (
    session_id TEXT NOT NULL,
    id TEXT NOT NULL,
    digest TEXT NOT NULL,
    from_seq INTEGER NOT NULL,
    to_seq INTEGER NOT NULL,
    at INTEGER NOT NULL,
    UNIQUE (session_id, id)
  );
  `,
  // v6: message embeddings (packed little-endian float32, normalised), one per message, and the
  // dimensions of each embedding model so vectors of mixed sizes are refused.
  `
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
  `,
  // v7: the full-text index carries each message's owner and session as tokens of a second column
  // (see sqlite/_fulltext.ts), so a search matches one owner's rows inside FTS5 instead of ranking
  // every owner's matches first. Contentless, with deletes by rowid: the scope is computed when the
  // text is indexed, and a delete needs nothing but the rowid (no copy of the owner per message).
  // Rebuilt from message_text through fts_pending.
  `
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
  `,
  // v8: an append writes two pages of log (its message row and its session row) where it wrote about
  // nine. The search text is no longer stored apart: the indexer reads it from the message body (the
  // SQL function threadkeep_search_text, registered by the store). Instead of a queue row per message,
  // each session says how far it is indexed (fts_seq: every message at or below it is in the index,
  // none above) and whether messages wait (fts_pending, found through a partial index that changes
  // once per session and indexing run, not per append). A message's full-text rowid is its session's
  // key times 2^32 plus its seq, so a delete needs no lookup table; AUTOINCREMENT keeps a deleted
  // session's key from coming back. The activity indexes hold the hour of the last activity
  // (active_hour, kept by triggers), not the time itself: an append moves them once an hour, not
  // every time; listing and expiry order and filter by the exact time within the hour. The sessions
  // table is rebuilt for its integer key; every session is marked pending, so the index is rebuilt
  // from the messages.
  `
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
  `,
  // v9: an append writes one page of log (its message's leaf) where it wrote two to four: the session
  // row is no longer moved by every append. A message's created_at is the time of the append that
  // wrote it, so the newest message knows the session's last activity. The row's last_activity_at is
  // the activity as of the row's last write, and activity_seq the session's last seq then: a session's
  // exact last activity is the newer of the row's and the newest message's above activity_seq (see
  // activitySql in sqlite/_activity.ts). An append writes the row when the hour changes (so
  // active_hour, the activity indexes' key, stays the hour of the exact activity); a touch, a pop or
  // any other write that sets or keeps the activity writes it with activity_seq at the last seq, so
  // messages below it never count (a touch may set a past time). Sessions whose messages wait for the
  // full-text index are rows of fts_queue, one small table, instead of a flag in the session row and
  // its partial index: joining the queue (a session's first append after an indexing run) writes one
  // page where the flag wrote two.
  `
  ALTER TABLE sessions ADD COLUMN activity_seq INTEGER NOT NULL DEFAULT 0;
  UPDATE sessions SET activity_seq = coalesce(
    (SELECT seq FROM messages WHERE session_id = sessions.id ORDER BY seq DESC LIMIT 1), 0);
  CREATE TABLE fts_queue (key INTEGER PRIMARY KEY);
  INSERT INTO fts_queue (key) SELECT key FROM sessions WHERE fts_pending = 1;
  DROP INDEX sessions_unindexed;
  ALTER TABLE sessions DROP COLUMN fts_pending;
  `,
];

/** The schema version this code writes and understands. */
export const SQLITE_SCHEMA_VERSION = SQLITE_MIGRATIONS.length;

/** Connection settings applied on open. */
export interface SqliteOpenSettings {
  path: string;
  busyTimeoutMs: number;
  synchronous: "full" | "normal";
  /** Bytes of the file read through memory mapping; 0 reads with system calls only. */
  mmapSizeBytes?: number;
  /** Pages of write-ahead log past which a commit checkpoints (SQLite's `wal_autocheckpoint`). @default 1000 */
  walAutocheckpointPages?: number;
  /** Stop at this version instead of the newest (tests build old databases with it). */
  targetVersion?: number;
}

function userVersion(db: Database.Database): number {
  return db.pragma("user_version", { simple: true }) as number;
}

/**
 * Opens (creating if needed) a database and brings its schema up to date.
 * @throws `schema_version_unsupported` when the file was written by a newer threadkeep; the file is left as it was.
 */
export function openSqliteDatabase(settings: SqliteOpenSettings): Database.Database {
  const memory = settings.path === ":memory:" || settings.path === "";
  if (!memory) mkdirSync(dirname(settings.path), { recursive: true });
  const db = new Database(settings.path, { timeout: settings.busyTimeoutMs });
  try {
    // The version check comes before anything that writes (journal mode is stored in the file header).
    const found = userVersion(db);
    if (found > SQLITE_SCHEMA_VERSION) {
      throw new ThreadkeepError(
        "schema_version_unsupported",
        `The SQLite database ${settings.path} has schema version ${found}, but this threadkeep understands up to ` +
          `${SQLITE_SCHEMA_VERSION}; upgrade threadkeep or point it at another file. The file was not changed.`,
        { details: { found, supported: SQLITE_SCHEMA_VERSION } },
      );
    }
    if (!memory) db.pragma("journal_mode = WAL");
    db.pragma(`synchronous = ${settings.synchronous === "full" ? "FULL" : "NORMAL"}`);
    if (!memory && settings.walAutocheckpointPages !== undefined) db.pragma(`wal_autocheckpoint = ${Math.max(0, Math.floor(settings.walAutocheckpointPages))}`);
    if (settings.mmapSizeBytes) db.pragma(`mmap_size = ${Math.max(0, Math.floor(settings.mmapSizeBytes))}`);
    migrate(db, settings.targetVersion ?? SQLITE_SCHEMA_VERSION);
    return db;
  } catch (error) {
    db.close();
    throw error;
  }
}

function migrate(db: Database.Database, target: number): void {
  if (userVersion(db) >= target) return;
  // IMMEDIATE takes the write lock first, so two processes opening a fresh file migrate it once.
  db.transaction(() => {
    for (let version = userVersion(db); version < target; version++) {
      db.exec(SQLITE_MIGRATIONS[version]);
      db.pragma(`user_version = ${version + 1}`);
    }
  }).immediate();
}
