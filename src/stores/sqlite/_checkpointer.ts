/**
 * WAL checkpoints off the commit path. By default SQLite checkpoints inside the commit that takes
 * the write-ahead log past 1,000 pages: that one append copies every page the log holds back into the
 * database file and syncs it, 10–20 ms where an append takes 60 µs, about once per hundred appends
 * (an append wrote about nine pages then: message, text, its index, the full-text queue, the session
 * row and its two indexes; two to four since schema v8), so it was the SQLite append's p99
 * (docs/decisions/0001-sqlite-schema.md). Here a worker thread with its own connection runs `PRAGMA wal_checkpoint(PASSIVE)`
 * after every {@link CHECKPOINT_EVERY_WRITES} writes, which never waits for, nor blocks, the store's
 * readers and writer; the store's own connection checkpoints only past {@link BACKSTOP_PAGES}, when
 * the worker cannot keep up (writes with no pause at all) or is gone.
 *
 * Durability is unchanged: the worker's connection uses the store's `synchronous` setting, so the
 * log is synced before its pages are copied and the database file after, exactly as the commit's
 * own checkpoint did.
 */
import { createRequire } from "node:module";
import { Worker } from "node:worker_threads";

/** Writes (transactions) between two checkpoints by the worker; the log then holds a few times this many pages. */
export const CHECKPOINT_EVERY_WRITES = 200;
/** Pages past which the store's connection checkpoints in a commit itself (SQLite's default is 1,000). */
export const BACKSTOP_PAGES = 10_000;

/** The pause between two passes of a worker that has not caught up with the log. */
const RETRY_MS = 20;
/** Control words shared with the worker. */
const WAKE = 0;
const CLOSING = 1;

// CommonJS in a string (`eval`), so the worker runs the same under tsx, vitest and the built package;
// the driver is resolved by the store and handed over, not looked up from the process's directory.
const WORKER_SOURCE = `
const { workerData } = require("node:worker_threads");
const Database = require(workerData.driver);
const control = new Int32Array(workerData.control);
const db = new Database(workerData.path, { fileMustExist: true, timeout: 0 });
db.pragma("synchronous = " + workerData.synchronous);
const closing = () => Atomics.load(control, ${CLOSING}) === 1;
// The log starts over at the first commit after a checkpoint that copied all of it. A commit that
// lands while the worker copies makes the log longer than what was copied ("log" is the length the
// pass started from), so the worker passes again every ${RETRY_MS} ms, each copying only what is new,
// until a pass finds the log no longer than the one before: the writes paused, and the next commit
// restarts the log instead of it growing to the store's backstop.
const checkpoint = () => {
  let length = -1;
  while (!closing()) {
    try {
      const [result] = db.pragma("wal_checkpoint(PASSIVE)");
      if (result.busy === 0 && result.log === result.checkpointed && result.log <= length) return;
      length = result.log;
    } catch {
      // Busy or failing now: tried again below, and the store's backstop still bounds the log.
    }
    Atomics.wait(control, ${CLOSING}, 0, ${RETRY_MS});
  }
};
for (;;) {
  Atomics.wait(control, ${WAKE}, 0);
  Atomics.store(control, ${WAKE}, 0);
  if (closing()) break;
  checkpoint();
}
db.close();
`;

/** What the store tells its checkpointer. */
export interface Checkpointer {
  /** Counts one committed write; every {@link CHECKPOINT_EVERY_WRITES} the worker is woken (started the first time). */
  wrote(): void;
  /** Stops the worker and closes its connection (before the store closes its own, which then removes the log). */
  close(): Promise<void>;
}

/** Options of {@link createCheckpointer}. */
export interface CheckpointerOptions {
  path: string;
  synchronous: "normal" | "full";
  /** Called when the worker failed or exited unexpectedly: the store's connection takes checkpoints back. */
  onLost(error: Error): void;
}

/** A checkpointer for the database at `path` (a file in WAL mode); its worker starts on the first wake. */
export function createCheckpointer(options: CheckpointerOptions): Checkpointer {
  const control = new Int32Array(new SharedArrayBuffer(8));
  let worker: Worker | undefined;
  let exited: Promise<void> | undefined;
  let lost = false;
  let closing = false;
  let writes = 0;

  const start = () => {
    const driver = createRequire(import.meta.url).resolve("better-sqlite3");
    const started = new Worker(WORKER_SOURCE, {
      eval: true,
      // The parent's flags (a TypeScript loader, an inspector) are not needed to run plain CommonJS.
      execArgv: [],
      workerData: {
        driver,
        path: options.path,
        synchronous: options.synchronous.toUpperCase(),
        control: control.buffer,
      },
    });
    // A checkpointer never keeps a process alive that has nothing else to do.
    started.unref();
    // An uncaught error is followed by an exit (code 1): one loss, reported once, with the error.
    const lose = (error: Error) => {
      if (lost) return;
      lost = true;
      if (!closing) options.onLost(error);
    };
    exited = new Promise((resolve) => {
      started.once("error", lose);
      started.once("exit", (code) => {
        lose(new Error(`the checkpoint worker exited with code ${code}`));
        resolve();
      });
    });
    worker = started;
  };

  return {
    wrote() {
      if (++writes < CHECKPOINT_EVERY_WRITES || lost || closing) return;
      writes = 0;
      if (!worker) {
        try {
          start();
        } catch (error) {
          // Called after a commit: a worker that cannot start must not fail the write that woke it.
          lost = true;
          options.onLost(error as Error);
          return;
        }
      }
      Atomics.store(control, WAKE, 1);
      Atomics.notify(control, WAKE);
    },
    async close() {
      if (closing) return;
      closing = true;
      if (!worker) return;
      Atomics.store(control, CLOSING, 1);
      Atomics.store(control, WAKE, 1);
      Atomics.notify(control, WAKE);
      // A checkpoint under way finishes first (it is bounded by the log); a stuck one is not waited for.
      const timer = setTimeout(() => void worker?.terminate(), 5_000);
      await exited;
      clearTimeout(timer);
    },
  };
}
