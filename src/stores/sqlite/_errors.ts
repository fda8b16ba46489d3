import Database from "better-sqlite3";
import { StoreUnavailableError, ThreadkeepError } from "../../core/errors.js";

/** Result codes (and their extended codes) of a statement the database refuses, which retrying will not fix. */
const REFUSALS = /^SQLITE_(ERROR|READONLY|PERM|AUTH)(_|$)/;
/** Extended codes of those that are passing: a snapshot to retry, a log being recovered. */
const TRANSIENT = new Set([
  "SQLITE_ERROR_RETRY",
  "SQLITE_ERROR_SNAPSHOT",
  "SQLITE_READONLY_RECOVERY",
  "SQLITE_READONLY_CANTINIT",
]);
/**
 * Codes of a write the disk had no room for: SQLITE_FULL (ENOSPC, or `max_page_count`), and
 * SQLITE_IOERR_WRITE, which is how SQLite reports every other failed write(2): EFBIG past a file-size
 * limit, EDQUOT past a quota (and EIO from a failing disk, which the driver does not tell apart).
 */
const NO_SPACE = new Set(["SQLITE_FULL", "SQLITE_IOERR_WRITE"]);

/** Turns driver failures into coded errors; coded errors and programming errors pass through. */
export function storeError(error: unknown): unknown {
  if (error instanceof ThreadkeepError) return error;
  if (error instanceof Database.SqliteError) {
    if (error.code.startsWith("SQLITE_CORRUPT") || error.code === "SQLITE_NOTADB") {
      return new ThreadkeepError("store_corrupt", `The SQLite database is damaged: ${error.message}`, {
        cause: error,
      });
    }
    // A statement the database refuses (a table or column altered under threadkeep, a read-only file)
    // fails the same way every time: flagged, so a turn lease refused is not taken for an outage.
    const refused = REFUSALS.test(error.code) && !TRANSIENT.has(error.code);
    // SQLite rolls the transaction back: nothing of the write is stored, and the next one may succeed.
    const details = refused
      ? { refused: true, sqliteCode: error.code }
      : NO_SPACE.has(error.code)
        ? { storageFull: true, sqliteCode: error.code }
        : undefined;
    return new StoreUnavailableError(`The SQLite store failed (${error.code}): ${error.message}`, {
      cause: error,
      ...(details ? { details } : {}),
    });
  }
  const failure = error as NodeJS.ErrnoException;
  if (failure?.syscall !== undefined || /database connection is not open/.test(String(failure?.message))) {
    return new StoreUnavailableError(`The SQLite store failed: ${failure.message}`, { cause: error });
  }
  return error;
}
