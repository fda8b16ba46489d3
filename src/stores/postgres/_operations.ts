/**
 * How the PostgreSQL store runs its operations so that an outage costs a turn milliseconds, not
 * seconds: every operation has a deadline, and once the server has been unreachable for the connect
 * timeout, operations fail at once (as on Redis) while one probe at a time finds out when it is back.
 * A statement that runs out of time (statement_timeout, a lock wait, a pool busy with those) is not an
 * outage: a missed deadline marks the server down only when a new connection cannot reach it either.
 */
import { ThreadkeepError } from "../../core/errors.js";
import type { PgClients } from "./_client.js";
import type { PgSql } from "./_client.js";
import { isConnectionError, toStoreError } from "./_errors.js";
import { PROBE_MS } from "./_timeouts.js";

/** How often the deadlines of operations under way are checked. */
const WATCHDOG_MS = 250;

interface Operation {
  started: number;
  deadline: number;
  what: string;
  reject: (error: unknown) => void;
  work: Promise<void> | null;
}

/** `fn(arg)` as a promise, a synchronous throw included. */
function callNow<A, T>(fn: (arg: A) => Promise<T>, arg: A): Promise<T> {
  try {
    return fn(arg);
  } catch (error) {
    return Promise.reject(error);
  }
}

/** Runs `fn` as the operation `what`, with the store's deadline and error mapping (see {@link PgOperations.run}). */
export type PgRun = <T>(what: string, fn: (sql: PgSql) => Promise<T>, how?: RunOptions) => Promise<T>;

/** How {@link PgOperations.run} runs an operation. */
export interface RunOptions {
  /**
   * Work on no caller's path (the search-index drain, the lease's heartbeat and cleanup): it runs on the spill pool when there is one,
   * so it never holds the main connection a caller's next operation expects to find free.
   */
  background?: boolean;
  /** How long the operation may take (the store's query timeout by default): an index build's statement. */
  timeoutMs?: number;
}

/** Settings of {@link PgOperations}. */
export interface PgOperationsOptions {
  /** The migrated clients (connected on first use; a failed start is retried). */
  connected: () => Promise<PgClients>;
  /** Whether the server answers on a connection of its own, within the connect timeout. */
  reachable: () => Promise<boolean>;
  queryTimeoutMs: number;
  connectTimeoutMs: number;
}

/** An error whose write may or may not have happened: the request may have reached the server. */
export function outcomeUnknown(what: string, message: string, cause?: unknown): ThreadkeepError {
  return new ThreadkeepError("store_unavailable", `${what}: ${message}`, {
    cause,
    details: { outcome: "unknown" },
  });
}

/** The operations of one store: deadlines, the outage state and its probe. */
export class PgOperations {
  readonly #options: PgOperationsOptions;
  /** Operations under way: for their deadlines, and so that close() lets them finish first. */
  readonly pending = new Set<Operation>();
  #watchdog: NodeJS.Timeout | null = null;
  /** When the server was first found unreachable in the current outage; 0 while it answers. */
  #downSince = 0;
  /** When an operation last succeeded. */
  #answeredAt = 0;
  #probe: NodeJS.Timeout | null = null;
  #probing = false;
  /** When the check of a missed deadline under way began (see #missed); 0 when none is. */
  #checkingSince = 0;
  #closed = false;
  /** Operations under way on the main connection: while there is one, the next goes to the spill pool. */
  #onMain = 0;
  /** The clients once connected (the store opens them once; a failed start leaves this null). */
  #clients: PgClients | null = null;

  constructor(options: PgOperationsOptions) {
    this.#options = options;
  }

  /**
   * Runs one store operation with a deadline, mapping driver errors to coded ones. One watchdog timer
   * serves every operation under way (a timer each would cost the hot path more than the query's own
   * JavaScript); it overshoots a deadline by at most WATCHDOG_MS. While the server has been
   * unreachable longer than the connect timeout, the operation is refused without being sent.
   */
  run<T>(what: string, fn: (sql: PgSql) => Promise<T>, how: RunOptions = {}): Promise<T> {
    if (this.#refusing()) {
      return Promise.reject(
        new ThreadkeepError(
          "store_unavailable",
          `${what}: the PostgreSQL server has been unreachable for ${Math.round((Date.now() - this.#downSince) / 100) / 10} s`,
        ),
      );
    }
    const { queryTimeoutMs, connectTimeoutMs } = this.#options;
    // In an outage that began just now, wait only what is left of its connect timeout.
    // While a missed deadline is being checked, as if the outage had begun with it.
    const since = this.#downSince || this.#checkingSince;
    const allowed = how.timeoutMs ?? queryTimeoutMs;
    const deadline = since ? Math.min(Date.now() + allowed, since + connectTimeoutMs) : Date.now() + allowed;
    return new Promise<T>((resolve, reject) => {
      const op: Operation = { started: Date.now(), deadline, what, reject, work: null };
      this.pending.add(op);
      this.#watch();
      let onMain = false;
      const start = (clients: PgClients) => {
        this.#clients = clients;
        if ((this.#onMain > 0 || how.background) && clients.spill) return fn(clients.spill);
        onMain = true;
        this.#onMain++;
        return fn(clients.main);
      };
      // Once connected, the statement is sent now rather than a promise's turn later.
      op.work = (this.#clients ? callNow(start, this.#clients) : this.#options.connected().then(start)).then(
        (value) => {
          if (onMain) this.#onMain--;
          this.pending.delete(op);
          this.#answeredAt = Date.now();
          this.#up();
          resolve(value);
        },
        (error) => {
          if (onMain) this.#onMain--;
          this.pending.delete(op);
          const coded = toStoreError(error, what);
          if (isConnectionError(error)) this.#down();
          reject(coded);
        },
      );
    });
  }

  /** Stops the probe and the watchdog (the store is closing). */
  close(): void {
    this.#closed = true;
    this.#clients = null;
    if (this.#probe) clearTimeout(this.#probe);
    this.#probe = null;
  }

  #refusing(): boolean {
    return this.#downSince > 0 && Date.now() - this.#downSince >= this.#options.connectTimeoutMs;
  }

  /**
   * Enters the outage, counted from `since`, or from the missed deadline whose check is under way:
   * an outage found by both is as old as the first sign of it.
   */
  #down(since = this.#checkingSince || Date.now()): void {
    if (this.#downSince) {
      this.#downSince = Math.min(this.#downSince, since);
      return;
    }
    this.#downSince = since;
    this.#scheduleProbe();
  }

  /**
   * An operation had no answer in time. A server that is away, or a statement the server is still
   * running (it stops it at statement_timeout, and the pool's other users queue meanwhile): a new
   * connection of its own tells the two apart, one check at a time.
   */
  #missed(): void {
    if (this.#downSince || this.#checkingSince || this.#closed) return;
    const since = Date.now();
    this.#checkingSince = since;
    this.#options
      .reachable()
      .catch(() => false)
      .then((reachable) => {
        this.#checkingSince = 0;
        if (!reachable && !this.#closed && this.#answeredAt < since) this.#down(since);
      });
  }

  #up(): void {
    this.#downSince = 0;
  }

  /** One `SELECT 1` at a time while down; the first answer ends the outage for every caller. */
  #scheduleProbe(): void {
    if (this.#probe || this.#closed) return;
    this.#probe = setTimeout(() => {
      this.#probe = null;
      if (!this.#downSince || this.#probing || this.#closed) return;
      this.#probing = true;
      let timer: NodeJS.Timeout | undefined;
      const limit = new Promise<void>((_, reject) => {
        timer = setTimeout(() => reject(new Error("probe timed out")), this.#options.connectTimeoutMs);
      });
      Promise.race([this.#options.connected().then(({ main }) => main`SELECT 1`), limit])
        .then(
          () => this.#up(),
          () => {},
        )
        .finally(() => {
          clearTimeout(timer);
          this.#probing = false;
          if (this.#downSince) this.#scheduleProbe();
        });
    }, PROBE_MS);
    this.#probe.unref();
  }

  #watch(): void {
    if (this.#watchdog) return;
    this.#watchdog = setInterval(() => {
      const now = Date.now();
      for (const op of this.pending) {
        if (op.deadline > now) continue;
        this.pending.delete(op);
        // Sent or still queued in the driver, nobody can tell: a write may yet land.
        op.reject(outcomeUnknown(op.what, "no answer from PostgreSQL in time"));
        this.#missed();
      }
      if (this.pending.size === 0 && this.#watchdog) {
        clearInterval(this.#watchdog);
        this.#watchdog = null;
      }
    }, WATCHDOG_MS);
    this.#watchdog.unref();
  }
}
