/**
 * Group commit for the SQLite store: appends issued in the same turn of the event loop (a busy server
 * gets several upstream replies per turn) share one transaction, so they pay one BEGIN and one COMMIT
 * (one WAL write, where the session and index pages they all touch are written once) between them.
 * Each append still runs in a savepoint of its own: one that fails (another owner's session, a stale
 * fence) is rolled back alone and only its caller hears of it.
 */
import timers from "node:timers";

// Taken when this module loads, so a test's fake timers (which replace the global and the module's
// function later) cannot hold a write back: the deferral is not time a caller should see.
const nextLoopTurn = timers.setImmediate;

/** What became of one write of a batch. */
export type BatchOutcome = { ok: true; value: unknown } | { ok: false; error: unknown };

/** How the group reaches the database. */
export interface GroupCommitOptions<C> {
  /** Runs `fn` on the database (opening it if needed); throws what the write threw, as a coded error. */
  use<T>(fn: (context: C) => T): T;
  /** Runs writes in one transaction, each in a savepoint; throws when the transaction itself failed. */
  batch(context: C, writes: readonly (() => unknown)[]): BatchOutcome[];
  /** The coded error of a write that failed within a batch. */
  toError(error: unknown): unknown;
}

interface Job<C> {
  run: (context: C) => unknown;
  resolve: (value: any) => void;
  reject: (error: unknown) => void;
}

/**
 * Collects writes until the event loop's next check phase (or until {@link flush}), then runs them
 * in order: alone, in its own transaction as before, when there is one; else in one batch.
 */
export class GroupCommit<C> {
  #pending: Job<C>[] = [];
  #scheduled = false;
  readonly #options: GroupCommitOptions<C>;

  constructor(options: GroupCommitOptions<C>) {
    this.#options = options;
  }

  /** Queues a write; resolves with its result once its transaction committed. */
  add<T>(run: (context: C) => T): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.#pending.push({ run, resolve, reject });
      if (!this.#scheduled) {
        this.#scheduled = true;
        nextLoopTurn(() => this.flush());
      }
    });
  }

  /** Runs every queued write now: called before any other use of the database, so program order holds. */
  flush(): void {
    this.#scheduled = false;
    const jobs = this.#pending;
    if (jobs.length === 0) return;
    this.#pending = [];
    const { use, batch, toError } = this.#options;
    if (jobs.length === 1) {
      try {
        jobs[0].resolve(use(jobs[0].run));
      } catch (error) {
        jobs[0].reject(error);
      }
      return;
    }
    let outcomes: BatchOutcome[];
    try {
      outcomes = use((context) => batch(context, jobs.map((job) => () => job.run(context))));
    } catch (error) {
      for (const job of jobs) job.reject(error);
      return;
    }
    outcomes.forEach((outcome, i) => (outcome.ok ? jobs[i].resolve(outcome.value) : jobs[i].reject(toError(outcome.error))));
  }
}
