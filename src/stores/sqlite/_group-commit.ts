/**
 * Group commit for the SQLite store: appends issued in the same turn of the event loop (a busy server
 * gets several upstream replies per turn) share one transaction, so they pay one BEGIN and one COMMIT
 * (one WAL write, where the session and index pages they all touch are written once) between them.
 * Each append still runs in a savepoint of its own: one that fails (another owner's session, a stale
 * fence) is rolled back alone and only its caller hears of it. With `tryUse` (a database other
 * processes write too), a group whose write lock another process holds is tried again later, the
 * event loop free meanwhile, instead of SQLite's busy handler putting the whole process to sleep for
 * a millisecond or more. The writes of turns (fenced appends, lease grants) always wait for their
 * group; any other write runs at once when no group is forming ({@link GroupCommit.addNow}).
 */
import timers from "node:timers";

// Taken when this module loads, so a test's fake timers (which replace the global and the module's
// function later) cannot hold a write back: the deferral is not time a caller should see.
const nextLoopTurn = timers.setImmediate;
const later = timers.setTimeout;

/** What {@link GroupCommitOptions.tryUse} returns when another connection holds the write lock. */
export const BUSY: unique symbol = Symbol("busy");

/** Tries at the next loop turn first (the other process's commit takes a fraction of a millisecond), then every millisecond. */
const IMMEDIATE_TRIES = 3;
/** After this long of finding the lock taken, a write waits for it as any other write does (SQLite's busy timeout). */
export const BUSY_TRY_FOR_MS = 100;

/** Schedules the `tries`-th try of a write that found the lock taken. */
export function afterBusy(tries: number, next: () => void): void {
  if (tries <= IMMEDIATE_TRIES) nextLoopTurn(next);
  else later(next, 1);
}

/**
 * Runs a write with `tryUse` until it is not {@link BUSY}, the event loop free between tries; past
 * {@link BUSY_TRY_FOR_MS}, with `use`, which waits in SQLite's busy handler.
 */
export async function writeWhenFree<T>(tryUse: () => T | typeof BUSY, use: () => T): Promise<T> {
  const since = Date.now();
  for (let tries = 1; ; tries++) {
    const result = Date.now() - since > BUSY_TRY_FOR_MS ? use() : tryUse();
    if (result !== BUSY) return result;
    await new Promise<void>((resolve) => afterBusy(tries, resolve));
  }
}

/** What became of one write of a batch. */
export type BatchOutcome = { ok: true; value: unknown } | { ok: false; error: unknown };

/** How the group reaches the database. */
export interface GroupCommitOptions<C> {
  /** Runs `fn` on the database (opening it if needed); throws what the write threw, as a coded error. */
  use<T>(fn: (context: C) => T): T;
  /** As `use`, but {@link BUSY} at once when another connection holds the write lock. */
  tryUse?<T>(fn: (context: C) => T): T | typeof BUSY;
  /** Runs writes in one transaction, each in a savepoint; throws when the transaction itself failed. */
  batch(context: C, writes: readonly (() => unknown)[]): BatchOutcome[];
  /** The coded error of a write that failed within a batch. */
  toError(error: unknown): unknown;
}

interface Job<C> {
  run: (context: C) => unknown;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

/**
 * Collects writes until the event loop's next check phase (or until {@link flush}), then runs them
 * in order: alone, in its own transaction as before, when there is one; else in one batch.
 */
export class GroupCommit<C> {
  #pending: Job<C>[] = [];
  #scheduled = false;
  /** When the group first found the write lock taken, while it keeps trying; else undefined. */
  #busySince: number | undefined;
  #busyTries = 0;
  readonly #options: GroupCommitOptions<C>;

  constructor(options: GroupCommitOptions<C>) {
    this.#options = options;
  }

  /** Queues a write; resolves with its result once its transaction committed. */
  add<T>(run: (context: C) => T): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      // The job resolves with what `run` returned, a T.
      this.#pending.push({ run, resolve: (value) => resolve(value as T), reject });
      if (!this.#scheduled) {
        this.#scheduled = true;
        nextLoopTurn(() => this.#flush(false));
      }
    });
  }

  /**
   * Runs a write at once when no group is forming (nothing queued, no flush due), else queues it as
   * {@link add} does. For a write that is not part of a turn: a caller appending one message at a time
   * does not wait for the event loop's check phase (about a sixth of such an append's time), and there
   * is no group for it to join. A write that finds another process's write lock taken is queued.
   */
  addNow<T>(run: (context: C) => T): Promise<T> {
    if (this.#scheduled || this.#pending.length > 0) return this.add(run);
    const { use, tryUse } = this.#options;
    let result: T | typeof BUSY;
    try {
      result = tryUse ? tryUse(run) : use(run);
    } catch (error) {
      return Promise.reject(error);
    }
    return result === BUSY ? this.add(run) : Promise.resolve(result);
  }

  /** Runs every queued write now: called before any other use of the database, so program order holds. */
  flush(): void {
    this.#flush(true);
  }

  #flush(wait: boolean): void {
    this.#scheduled = false;
    const jobs = this.#pending;
    if (jobs.length === 0) return;
    this.#pending = [];
    const { use, tryUse, batch, toError } = this.#options;
    const patient =
      wait || !tryUse || (this.#busySince !== undefined && Date.now() - this.#busySince > BUSY_TRY_FOR_MS);
    const run: <T>(fn: (context: C) => T) => T | typeof BUSY = patient ? use : tryUse;
    let result: unknown;
    try {
      result =
        jobs.length === 1
          ? run(jobs[0].run)
          : run((context) =>
              batch(
                context,
                jobs.map((job) => () => job.run(context)),
              ),
            );
    } catch (error) {
      this.#busySince = undefined;
      for (const job of jobs) job.reject(error);
      return;
    }
    if (result === BUSY) return this.#retry(jobs);
    this.#busySince = undefined;
    if (jobs.length === 1) return jobs[0].resolve(result);
    (result as BatchOutcome[]).forEach((outcome, i) =>
      outcome.ok ? jobs[i].resolve(outcome.value) : jobs[i].reject(toError(outcome.error)),
    );
  }

  /** Puts a group that found the lock taken back in front of the queue, and tries it again soon. */
  #retry(jobs: Job<C>[]): void {
    this.#pending = jobs.concat(this.#pending);
    if (this.#busySince === undefined) {
      this.#busySince = Date.now();
      this.#busyTries = 0;
    }
    this.#scheduled = true;
    afterBusy(++this.#busyTries, () => this.#flush(false));
  }
}
