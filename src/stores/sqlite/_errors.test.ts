import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { isStorageFull, isStoreRefusal } from "../../core/errors.js";
import { storeError } from "./_errors.js";

describe("SQLite errors: a write with no room", () => {
  it("flags SQLITE_FULL (a database that cannot grow) as storage full, not a refusal", () => {
    const db = new Database(":memory:");
    try {
      db.exec("CREATE TABLE t (x TEXT)");
      // The page limit is SQLite's own way to a real SQLITE_FULL, as ENOSPC gives on a full disk.
      db.pragma(`max_page_count = ${db.pragma("page_count", { simple: true })}`);
      let thrown: unknown;
      try {
        db.prepare("INSERT INTO t VALUES (?)").run("x".repeat(100_000));
      } catch (error) {
        thrown = error;
      }
      expect((thrown as { code?: string }).code).toBe("SQLITE_FULL");
      const mapped = storeError(thrown);
      expect(isStorageFull(mapped)).toBe(true);
      expect(isStoreRefusal(mapped)).toBe(false);
      expect(db.prepare("SELECT count(*) AS n FROM t").get()).toEqual({ n: 0 });
    } finally {
      db.close();
    }
  });

  it("flags SQLITE_IOERR_WRITE (a write past a file-size limit or quota) and nothing else", () => {
    const error = (code: string) => new Database.SqliteError("disk I/O error", code);
    expect(isStorageFull(storeError(error("SQLITE_IOERR_WRITE")))).toBe(true);
    for (const code of ["SQLITE_BUSY", "SQLITE_IOERR_READ", "SQLITE_READONLY", "SQLITE_CORRUPT"]) {
      expect(isStorageFull(storeError(error(code))), code).toBe(false);
    }
  });
});
