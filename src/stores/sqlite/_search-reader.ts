/**
 * Searches off the event loop. A search without `sessionId` is one SQLite statement over every message
 * of the owner that holds its words: 80–160 ms at 100,000 messages, about 1.5 s at a million
 * (docs/benchmarks.md, "Event loop"), and on the store's thread every other user's request waited that
 * long. Cutting it into spans with the loop free between them kept the holds short but made each
 * search up to 40% slower, since FTS5's bm25 counts each word over the whole index once per statement.
 * Here the statement runs unchanged on a worker thread with a read-only connection of its own (the
 * file is in WAL mode, so it reads while the store writes), and the store's thread only parses what
 * comes back: at most the search's limit, or, for a relevance search of one long session (more than
 * 10,000 seqs, `sqlite/_search.ts`), its matches, in parts it asks for one after another.
 *
 * What a search must see is written before it asks: the store flushes its queued appends and indexes
 * the owner's waiting text on its own connection first (`sqlite/_search.ts`); the worker's read
 * starts after those commits, so it sees them. One worker per store, started by the first such search
 * (a store that never makes one starts none) and kept: a search is frequent where a vector index
 * build is rare. Where the worker cannot serve (it failed to start, its connection failed, it died)
 * the store searches on its own thread as before, with one warning.
 */
import { createRequire } from "node:module";
import { Worker } from "node:worker_threads";
import type { MessageRow } from "./_rows.js";
import { SEARCH_SQL, type SearchStatement } from "./_search-statements.js";

/**
 * The searchable text of a stored body in the worker, as `searchTextOf` (`sqlite/_search-statements.ts`)
 * computes it for the store's connection (`contentText`, lowercased): the substring search calls it
 * for every message it reads. Plain JavaScript in a string, as the worker's entry is; a test holds
 * the two to the same answers.
 */
export const WORKER_SEARCH_TEXT = `(body) => {
  if (typeof body !== "string") return "";
  try {
    const content = JSON.parse(body)?.content;
    const text = typeof content === "string" ? content
      : Array.isArray(content) ? content.filter((part) => typeof part.text === "string").map((part) => part.text).join("\\n")
      : "";
    return text.toLowerCase();
  } catch {
    return "";
  }
}`;

/**
 * Rows per message from the worker (~2 ms to take apart on the store's thread). A large answer (every
 * match of a long session) comes in parts, each asked for when the one before has arrived: messages
 * already queued are all taken apart in one go, so parts sent at once would hold the store's thread
 * for the whole answer (40,000 rows: 40–60 ms).
 */
const ROWS_PER_MESSAGE = 2_000;

// CommonJS in a string (`eval`), as the checkpoint worker's: it starts the same under vitest, tsx and
// the built package, and needs no TypeScript loader, so it is ready in tens of milliseconds.
const WORKER_SOURCE = `
const { workerData, parentPort } = require("node:worker_threads");
const Database = require(workerData.driver);
const db = new Database(workerData.path, { fileMustExist: true, readonly: true, timeout: workerData.busyTimeoutMs });
if (workerData.mmapSizeBytes > 0) db.pragma("mmap_size = " + workerData.mmapSizeBytes);
db.function("threadkeep_search_text", { deterministic: true }, ${WORKER_SEARCH_TEXT});
const statements = {};
for (const [name, sql] of Object.entries(workerData.statements)) statements[name] = db.prepare(sql).raw();
// Answers not yet sent whole, by id: the rest goes out a part at a time, as the store's thread asks.
const unsent = new Map();
const sendPart = (id) => {
  const rows = unsent.get(id);
  const part = rows.splice(0, ${ROWS_PER_MESSAGE});
  if (rows.length === 0) unsent.delete(id);
  parentPort.postMessage({ id, rows: part, more: rows.length > 0 });
};
parentPort.on("message", ({ id, name, args, next, close }) => {
  // Closed here, the connection lets the store's own close checkpoint the log and remove it.
  if (close) {
    db.close();
    parentPort.close();
    return;
  }
  if (next) {
    if (unsent.has(id)) sendPart(id);
    return;
  }
  try {
    unsent.set(id, statements[name].all(...args));
    sendPart(id);
  } catch (error) {
    parentPort.postMessage({ id, error: String((error && error.message) || error) });
  }
});
parentPort.postMessage({ ready: true });
`;

/** What the store asks of its search thread. */
export interface SearchReader {
  /**
   * The rows of one of {@link SEARCH_SQL}'s statements, read on the worker's connection;
   * undefined when the worker cannot serve (the caller then runs the statement itself).
   */
  rows(name: SearchStatement, args: unknown[]): Promise<MessageRow[] | undefined>;
  /** Stops the worker and closes its connection; searches still waiting get undefined. */
  close(): Promise<void>;
}

/** Options of {@link createSearchReader}. */
export interface SearchReaderOptions {
  /** The database file (WAL). */
  path: string;
  /** How long the worker's read waits for a lock (a WAL reader rarely waits at all). */
  busyTimeoutMs: number;
  /** The store's `mmapSizeBytes`: its connection reads the file as the store's does. */
  mmapSizeBytes?: number;
}

/** A search under way: the parts of its answer so far, and how it is settled. */
interface Pending {
  parts: MessageRow[][];
  settle: (rows: MessageRow[] | undefined) => void;
}

/** How long a close waits for the worker to close its connection before stopping it. */
const CLOSE_PATIENCE_MS = 5_000;

/** A search thread for the store on `path`; its worker starts with the first search. */
export function createSearchReader(options: SearchReaderOptions): SearchReader {
  let worker: Worker | undefined;
  let ready: Promise<boolean> | undefined;
  let exited: Promise<void> | undefined;
  let lost = false;
  let closing = false;
  let nextId = 0;
  const pending = new Map<number, Pending>();

  const settleAll = () => {
    for (const { settle } of pending.values()) settle(undefined);
    pending.clear();
  };
  const lose = (message: string) => {
    if (lost) return;
    lost = true;
    settleAll();
    if (!closing) {
      console.warn(`[threadkeep] sqlite: the search thread stopped (${message}); searches run on the store's thread`);
    }
    void worker?.terminate();
  };

  const start = (): Promise<boolean> => {
    const started = new Worker(WORKER_SOURCE, {
      eval: true,
      // The parent's flags (a TypeScript loader, an inspector) are not needed to run plain CommonJS.
      execArgv: [],
      workerData: {
        driver: createRequire(import.meta.url).resolve("better-sqlite3"),
        path: options.path,
        busyTimeoutMs: options.busyTimeoutMs,
        mmapSizeBytes: Math.max(0, Math.floor(options.mmapSizeBytes ?? 0)),
        statements: SEARCH_SQL,
      },
    });
    // Only a search under way keeps the process alive (see rows).
    started.unref();
    worker = started;
    exited = new Promise((resolve) => started.once("exit", () => resolve()));
    return new Promise<boolean>((resolve) => {
      type Answer = { ready?: true; id?: number; rows?: MessageRow[]; more?: boolean; error?: string };
      started.on("message", (message: Answer) => {
        if (message.ready) return resolve(true);
        const search = pending.get(message.id!);
        if (!search) return;
        if (message.more) {
          search.parts.push(message.rows!);
          started.postMessage({ id: message.id, next: true });
          return;
        }
        pending.delete(message.id!);
        if (pending.size === 0) started.unref();
        // A statement that failed here is run by the store's connection, whose error (busy, corrupt,
        // closed) the store maps as it maps every other; the worker itself stays.
        if (message.error !== undefined) return search.settle(undefined);
        search.settle(search.parts.length === 0 ? message.rows : [...search.parts, message.rows!].flat());
      });
      started.once("error", (error) => {
        lose(error.message);
        resolve(false);
      });
      started.once("exit", (code) => {
        lose(`exited with code ${code}`);
        resolve(false);
      });
    });
  };

  return {
    async rows(name, args) {
      if (lost || closing) return undefined;
      try {
        ready ??= start();
      } catch (error) {
        lose((error as Error).message);
        return undefined;
      }
      if (!(await ready) || lost || closing) return undefined;
      const id = nextId++;
      return new Promise<MessageRow[] | undefined>((resolve) => {
        pending.set(id, { parts: [], settle: resolve });
        // An awaited search keeps the process alive until its answer (else a script whose only
        // pending work is this await would end with Node's exit code 13).
        worker!.ref();
        worker!.postMessage({ id, name, args });
      });
    },
    async close() {
      if (closing) return;
      closing = true;
      settleAll();
      if (!worker || lost) return;
      // The worker closes its connection after the statement under way; one that does not answer in
      // time is stopped (its connection then goes with the thread).
      worker.postMessage({ close: true });
      const timer = setTimeout(() => void worker?.terminate(), CLOSE_PATIENCE_MS);
      await exited;
      clearTimeout(timer);
    },
  };
}
