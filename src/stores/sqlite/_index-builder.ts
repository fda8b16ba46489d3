/**
 * Vector index builds off the event loop. Training an owner's cells and placing each of its vectors
 * costs ~0.5 ms of CPU a vector (a minute at 100,000 of 768 dimensions): run on the store's thread it
 * held every other user's request for as long. Here a worker thread opens the file with a connection
 * of its own, plans the build from a read (WAL: the store's readers and writer go on meanwhile) and
 * writes it beside the published cells in transactions of about a millisecond, sleeping after each
 * three to four times as long as it held the lock (another connection's write, waiting in SQLite's
 * busy handler on its event loop, finds the lock free), then publishes it in one small transaction
 * (sqlite/_vector-index.ts).
 * Searches meanwhile scan exactly (a first build) or use the earlier cells (a retraining).
 * docs/decisions/0006-vector-index-builds.md says why a worker rather than slices on the loop.
 *
 * Builds run one at a time per store, one worker each (started for the build, gone after it: builds
 * are rare, and an idle worker would hold a connection and memory for nothing).
 */
import { createRequire } from "node:module";
import { Worker } from "node:worker_threads";
import { WRITE_SLICE_MS } from "./_vector-index.js";

/**
 * The longest the worker sleeps after one of a build's transactions. It sleeps three to four times as
 * long as the transaction held the lock (about a millisecond; more when its thread lost the core
 * meanwhile, and a writer that waited that long polls less often in SQLite's busy handler), with
 * jitter so that such a writer's polls do not keep falling on the transactions.
 */
const PAUSE_MAX_MS = 30;
/** A build's transactions between two checkpoints of the log (passive: they wait for no one). */
const CHECKPOINT_EVERY_SLICES = 100;

/** What the store asks of its builder. */
export interface VectorIndexBuilder {
  /** Builds (or trains again) the owner's index in the background; a build already queued or under way is not repeated. */
  build(userId: string, model: string, count: number, again: boolean): void;
  /** Resolves once no build is queued or under way. */
  idle(): Promise<void>;
  /** Stops a build under way at its next session or transaction (nothing of it is published) and waits for its worker. */
  close(): Promise<void>;
}

/** Options of {@link createVectorIndexBuilder}. */
export interface VectorIndexBuilderOptions {
  /** The database file (WAL). */
  path: string;
  /** How long the worker's write waits for the store's lock. */
  busyTimeoutMs: number;
  /** The store's `vectorIndex.retrainAfter`: a retraining asked for an owner not grown that much (trained meanwhile) is skipped. */
  retrainAfter: number;
}

/** A build the worker runs: {@link runVectorIndexBuild}'s argument. */
export interface VectorIndexBuildJob {
  driver: string;
  path: string;
  busyTimeoutMs: number;
  userId: string;
  model: string;
  count: number;
  /** A retraining (skipped unless the owner grew `retrainAfter` times), else a first build (skipped when indexed meanwhile). */
  again: boolean;
  retrainAfter: number;
  /** Int32 word 0 set to 1: stop. */
  control: SharedArrayBuffer;
}

// The entry is CommonJS in a string (`eval`, as sqlite/_checkpointer.ts does), so it starts the same
// under vitest, tsx and the built package; it imports this module by URL, through tsx's loader when
// the URL is TypeScript source (tests and benches run the source; the package runs dist/*.js).
const WORKER_SOURCE = `
const { workerData, parentPort } = require("node:worker_threads");
(async () => {
  if (workerData.tsx) (await import(workerData.tsx)).register();
  const { runVectorIndexBuild } = await import(workerData.module);
  return runVectorIndexBuild(workerData.job);
})().then(
  (built) => parentPort.postMessage({ built }),
  (error) => parentPort.postMessage({ error: String((error && error.message) || error) }),
);
`;

/**
 * Runs in the worker: plans the owner's build on a connection of its own, then writes it.
 * @returns whether an index was written (false: no extension, no vectors, or stopped).
 */
export async function runVectorIndexBuild(job: VectorIndexBuildJob): Promise<boolean> {
  const Database = createRequire(import.meta.url)(job.driver) as typeof import("better-sqlite3");
  const { buildUnderWay, planOwnerIndex, writeOwnerIndex } = await import("./_vector-index.js");
  const control = new Int32Array(job.control);
  const db = new Database(job.path, { fileMustExist: true, timeout: job.busyTimeoutMs });
  try {
    // Asked again while an earlier build ran: done already, unless the owner grew since.
    const indexed = db
      .prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'vector_index_owners'")
      .get()
      ? (db
          .prepare("SELECT trained, size FROM vector_index_owners WHERE model = ? AND user_id = ?")
          .get(job.model, job.userId) as { trained: number; size: number } | undefined)
      : undefined;
    if (indexed && (!job.again || indexed.size < indexed.trained * job.retrainAfter)) return false;
    // Another process (or store) is writing the owner's build: it would not be superseded.
    if (buildUnderWay(db, job.userId, job.model)) return false;
    const cancelled = () => Atomics.load(control, 0) === 1;
    const plan = planOwnerIndex(db, job.userId, job.model, job.count, cancelled);
    if (!plan || cancelled()) return false;
    let slices = 0;
    return writeOwnerIndex(db, plan, {
      cancelled,
      // Free three to four times as long as it held the lock (at most PAUSE_MAX_MS); a close wakes it.
      pause: (heldMs) => {
        // The store's checkpoints follow its own writes, not this connection's: without these the log
        // would grow by the whole build, and the store's next commit past the backstop would copy it.
        if (++slices % CHECKPOINT_EVERY_SLICES === 0) db.pragma("wal_checkpoint(PASSIVE)");
        const ms = Math.min(PAUSE_MAX_MS, Math.max(WRITE_SLICE_MS, heldMs) * (3 + Math.random()));
        Atomics.wait(control, 0, 0, ms);
      },
    });
  } finally {
    db.close();
  }
}

/** A builder for the store on `path`. */
export function createVectorIndexBuilder(options: VectorIndexBuilderOptions): VectorIndexBuilder {
  type Job = { userId: string; model: string; count: number; again: boolean };
  const queued = new Map<string, Job>();
  const control = new Int32Array(new SharedArrayBuffer(4));
  let running: Promise<void> | undefined;
  let closing = false;
  const waiters: (() => void)[] = [];
  let current: Worker | undefined;
  // Someone awaits the builds (idle, close): the worker must keep the process alive until then, or a
  // script whose only pending work is that await ends with Node's exit code 13 (an unsettled await).
  const awaited = () => waiters.length > 0 || closing;

  const runOne = (job: Job) =>
    new Promise<void>((resolve) => {
      const require = createRequire(import.meta.url);
      const module = import.meta.url;
      const worker = new Worker(WORKER_SOURCE, {
        eval: true,
        execArgv: [],
        workerData: {
          module,
          tsx: module.endsWith(".ts") ? import.meta.resolve("tsx/esm/api") : undefined,
          job: {
            driver: require.resolve("better-sqlite3"),
            path: options.path,
            busyTimeoutMs: options.busyTimeoutMs,
            retrainAfter: options.retrainAfter,
            ...job,
            control: control.buffer,
          },
        },
      });
      // A build nobody awaits never keeps a process alive that has nothing else to do.
      if (!awaited()) worker.unref();
      current = worker;
      let reported = false;
      const fail = (message: string) => {
        if (reported || closing) return;
        reported = true;
        // The next search that finds the owner unindexed (or grown) asks again.
        console.warn(`[threadkeep] sqlite: building the vector index failed (${message})`);
      };
      worker.on("message", (result: { built?: boolean; error?: string }) => {
        if (result.error !== undefined) fail(result.error);
        reported = true;
      });
      worker.once("error", (error) => fail(error.message));
      worker.once("exit", () => {
        if (current === worker) current = undefined;
        resolve();
      });
    });

  const drain = async () => {
    while (queued.size > 0 && !closing) {
      const [key, job] = queued.entries().next().value as [string, Job];
      // Taken off the queue as it starts: a search asking during the build queues one more, which the
      // worker skips unless it is still needed then (a retraining noticed while the first build wrote).
      queued.delete(key);
      await runOne(job);
    }
    running = undefined;
    for (const wake of waiters.splice(0)) wake();
  };

  return {
    build(userId, model, count, again) {
      if (closing) return;
      const key = `${model}\n${userId}`;
      if (queued.has(key)) return;
      queued.set(key, { userId, model, count, again });
      running ??= drain();
    },
    idle() {
      if (!running) return Promise.resolve();
      const done = new Promise<void>((resolve) => waiters.push(resolve));
      current?.ref();
      return done;
    },
    async close() {
      closing = true;
      Atomics.store(control, 0, 1);
      Atomics.notify(control, 0);
      current?.ref();
      await running;
    },
  };
}
