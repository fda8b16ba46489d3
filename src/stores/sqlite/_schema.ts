/**
 * Opening the SQLite store's database and bringing its schema up to date: the forward migrations,
 * one file each in `sqlite/migrations/`. The schema version lives in `PRAGMA user_version`; migration
 * `i` takes a database from version `i` to `i + 1`.
 */
import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import Database from "better-sqlite3";
import { ThreadkeepError } from "../../core/errors.js";
import { SQLITE_MIGRATIONS } from "./migrations/index.js";

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
    if (!memory && settings.walAutocheckpointPages !== undefined)
      db.pragma(`wal_autocheckpoint = ${Math.max(0, Math.floor(settings.walAutocheckpointPages))}`);
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
