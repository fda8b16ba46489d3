/**
 * SQLite files for the store tests: a temporary folder per test file with a fresh database path per
 * case, removed after the file's tests, and stores that are closed after each test.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach } from "vitest";
import type { FullStore } from "../../src/core/types.js";
import { createSqliteStore, type SqliteStoreOptions } from "../../src/stores/sqlite/index.js";

/** A temporary folder named after `prefix` (removed after all tests) and a new database path per call. */
export function sqliteTempFiles(prefix: string): { dir: string; freshPath: () => string } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  let files = 0;
  return { dir, freshPath: () => join(dir, `case-${++files}`, "threadkeep.db") };
}

/** `storeAt` opens SQLite stores that are closed after each test of the enclosing `describe`. */
export function sqliteStoresPerTest(): {
  storeAt: (path: string, options?: Omit<SqliteStoreOptions, "path">) => FullStore;
} {
  const open: FullStore[] = [];
  afterEach(async () => {
    await Promise.all(open.splice(0).map((s) => s.close()));
  });
  return {
    storeAt: (path, options) => {
      const store = createSqliteStore({ ...options, path });
      open.push(store);
      return store;
    },
  };
}
