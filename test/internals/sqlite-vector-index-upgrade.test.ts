/**
 * A vector index of an earlier layout (sqlite/_vector-index.ts `dropEarlierIndex`) dropped by two
 * connections at once, as two processes upgraded together do: the one that finds the earlier layout
 * gone when it gets the write lock (the other dropped it meanwhile) leaves it at that, instead of
 * failing on a table that is no longer there.
 */
import { createRequire } from "node:module";
import { Worker } from "node:worker_threads";
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { isIndexed, loadVectorExtension } from "../../src/stores/sqlite/_vector-index.js";
import { createSqliteStore } from "../../src/stores/sqlite/index.js";
import { sqliteTempFiles } from "../stores/_sqlite-files.js";

const { freshPath } = sqliteTempFiles("threadkeep-sqlite-vector-upgrade-");

// The other process: takes the write lock, signals, holds it a while, drops the earlier index, commits.
const OTHER = `
const { workerData } = require("node:worker_threads");
const Database = require(workerData.driver);
const db = new Database(workerData.path, { timeout: 5000 });
const signal = new Int32Array(workerData.signal);
db.exec("BEGIN IMMEDIATE");
Atomics.store(signal, 0, 1);
Atomics.notify(signal, 0);
Atomics.wait(signal, 1, 0, 300);
db.exec("DROP TABLE vector_index_ivf1; DROP TABLE vector_index_owners; COMMIT");
db.close();
`;

describe("sqlite vector index of an earlier layout", () => {
  it("is dropped once when two connections find it at the same time", async () => {
    const path = freshPath();
    const store = createSqliteStore({ path, backgroundCheckpoints: false });
    await store.createSession({ id: "s", userId: "owner" });
    await store.close();
    const db = new Database(path, { timeout: 5_000 });
    try {
      // The earlier layout: an owners table without build ids, and a virtual table of cells (FTS5 here,
      // which the other connection can drop without sqlite-vec).
      db.exec(`
        CREATE TABLE vector_index_owners (model TEXT NOT NULL, user_id TEXT NOT NULL, generation INTEGER NOT NULL,
          trained INTEGER NOT NULL, size INTEGER NOT NULL, scale REAL NOT NULL, centroids BLOB NOT NULL,
          PRIMARY KEY (model, user_id));
        CREATE VIRTUAL TABLE vector_index_ivf1 USING fts5(x);`);
      expect(loadVectorExtension(db)).toBe(true);
      const signal = new Int32Array(new SharedArrayBuffer(8));
      const other = new Worker(OTHER, {
        eval: true,
        workerData: { driver: createRequire(import.meta.url).resolve("better-sqlite3"), path, signal: signal.buffer },
      });
      const exited = new Promise((resolve, reject) => {
        other.once("exit", resolve);
        other.once("error", reject);
      });
      while (Atomics.load(signal, 0) === 0) await new Promise((resolve) => setTimeout(resolve, 5));
      // Finds the earlier layout (the other's drop is not committed), waits for the lock, and finds it gone.
      expect(isIndexed(db, "owner", "m")).toBe(false);
      await exited;
      const columns = db.prepare("SELECT name FROM pragma_table_info('vector_index_owners')").pluck().all();
      expect(columns).toContain("build");
    } finally {
      db.close();
    }
  });
});
