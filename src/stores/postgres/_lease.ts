/**
 * The PostgreSQL turn lease: whole turns of one session run one at a time across every process that
 * shares the database, in arrival order as far as the database can tell arrival.
 *
 * - `leases` holds one row per session: the current fence and when it lapses. A grant is one atomic
 *   upsert that succeeds only when the row is free or lapsed, so two holders can never overlap.
 * - Fences come from one sequence, so they only grow, even across deleted and recreated sessions;
 *   `threadkeep_append` refuses a fence older than the row's.
 * - `lease_queue` holds a ticket per waiter. Only the lowest live ticket of a session may take the
 *   lease, which makes the line FIFO across processes. Waiters keep their tickets alive by heartbeat,
 *   so a crashed process stops blocking the line after {@link TICKET_TTL_MS}.
 * - In one process, waiters of a session queue locally and only the first polls the database; a
 *   release NOTIFYs the other processes, and polling remains as the fallback.
 * - A turn opened with `open(…, read)` reads its session, window, summaries and state in the statement
 *   that grants the lease (`postgres/_turn.ts`), and a write with `releaseLease` gives the lease back
 *   in its own statement ({@link PostgresLeases.releasedByWrite} tells this instance).
 * - `set_config('synchronous_commit', 'off', true)` in a statement lets its transaction commit without
 *   waiting for the WAL flush. What a server crash may lose harmlessly uses it (a crash fails every
 *   holder and waiter anyway): releases (the lease would lapse) and tickets; and the grants of turns
 *   (`open(…, read)`), so that a turn waits for one flush, its write's. A lost grant may see its fence
 *   handed out again, so every grant names its holder (`leases.holder`, a random token per waiter) and
 *   a write checks both ({@link PostgresLeases.holder}, `postgres/migrations/010-held-writes.ts`). Grants of
 *   {@link PostgresLeases.acquire} stay durable: a write with their fence is sound by number alone.
 */
import { randomUUID } from "node:crypto";
import { ThreadkeepError } from "../../core/errors.js";
import type { Lease, LeaseOptions } from "../../core/types.js";
import { DEFAULT_LEASE_TTL_MS, DEFAULT_LEASE_WAIT_MS } from "../_lease.js";
import type { RunOptions } from "./_operations.js";
import type { PgSql } from "./_client.js";
import {
  type Attempt,
  attemptLease,
  beatTickets,
  dropTickets,
  giveBackLeases,
  insertTickets,
  notifyWaiters,
  refenceLease,
  releaseLease,
  renewLease,
  TICKET_TTL_MS,
  tryLease,
} from "./_lease-statements.js";
import type { TurnReadArgs } from "./_turn.js";

const HEARTBEAT_MS = 1_000;
/** Longest sleep between two tries of the first waiter when no notification comes. */
const POLL_MS = 250;

interface Waiter {
  ttlMs: number;
  /** Read the turn's data in the granting statement (`openTurn`). */
  read?: TurnReadArgs;
  /** Names this waiter's grant in the `leases` row, so a grant whose answer was lost can be given back. */
  token: string;
  ticket?: number;
  /** Granted, timed out or failed: nothing more may happen to it. */
  done: boolean;
  resolve: (granted: Granted) => void;
  reject: (error: unknown) => void;
  timer: NodeJS.Timeout;
}

interface Line {
  queue: Waiter[];
  running: boolean;
  /** Something happened (release, notification, arrival) since the driver last asked the database. */
  dirty: boolean;
  wake: (() => void) | null;
}

/** A granted lease, and what its grant read when the waiter asked (see {@link TurnReadArgs}). */
export interface Granted {
  lease: Lease;
  /** The turn's document (see `threadkeep_turn_doc`). */
  read?: string | null;
}

/** A lease this instance was granted and has not seen given back. */
interface Held {
  sessionId: string;
  fence: number;
  /** The waiter's token the grant named (`leases.holder`): writes, renew and release present it. */
  token: string;
  /** Given back (by its release, or by a write with `releaseLease`): release and renew do nothing. */
  released: boolean;
}

/** One key per grant held here: a fence is unique per session unless a crash lost its first grant. */
const heldKey = (sessionId: string, fence: number) => `${sessionId}\n${fence}`;

/** What the leases need from their store. */
export interface LeaseHost {
  /** The ready client (connected and migrated), for the notification listener (the driver's own connection). */
  sql: () => Promise<PgSql>;
  /**
   * Runs statements with the store's deadline and error mapping, so no lease step can hang a turn.
   * Upkeep nobody awaits (heartbeats, dropped tickets, notifications, give-backs) runs as
   * `background`, so it never holds the main connection a caller's next operation expects to find free.
   */
  run: <T>(what: string, fn: (sql: PgSql) => Promise<T>, how?: RunOptions) => Promise<T>;
  /** The NOTIFY channel of this schema. */
  channel: string;
  /** Maps a driver error to a coded error (see `toStoreError`). */
  fail: (error: unknown, what: string) => unknown;
  /** How long close() waits for a query under way before it gives up on it. */
  patienceMs: number;
}

/** Turn leases of one store instance, backed by the `leases` and `lease_queue` tables. */
export class PostgresLeases {
  #host: LeaseHost;
  #lines = new Map<string, Line>();
  #held = new Map<string, Held>();
  #drivers = new Set<Promise<void>>();
  #heartbeat: NodeJS.Timeout | null = null;
  #listening: Promise<unknown> | null = null;
  #closed = false;

  constructor(host: LeaseHost) {
    this.#host = host;
  }

  /** Waits in line for the session's lease. @throws `session_busy` after `waitMs`. */
  async acquire(sessionId: string, options: LeaseOptions = {}): Promise<Lease> {
    return (await this.open(sessionId, options)).lease;
  }

  /**
   * Waits in line for the session's lease like {@link acquire}; with `read`, the statement that grants
   * it also reads the turn's data (`threadkeep_turn_read`), so an uncontended turn opens in one round trip.
   */
  open(sessionId: string, options: LeaseOptions = {}, read?: TurnReadArgs): Promise<Granted> {
    if (this.#closed) {
      return Promise.reject(new ThreadkeepError("store_unavailable", "The PostgreSQL store is closed"));
    }
    const ttlMs = options.ttlMs ?? DEFAULT_LEASE_TTL_MS;
    const waitMs = options.waitMs ?? DEFAULT_LEASE_WAIT_MS;
    let line = this.#lines.get(sessionId);
    if (!line) {
      line = { queue: [], running: false, dirty: false, wake: null };
      this.#lines.set(sessionId, line);
    }
    const current = line;
    return new Promise<Granted>((resolve, reject) => {
      const waiter: Waiter = {
        ttlMs,
        read,
        token: randomUUID(),
        done: false,
        resolve,
        reject,
        timer: setTimeout(() => {
          const error = new ThreadkeepError(
            "session_busy",
            `Timed out after ${waitMs} ms waiting for the turn of session ${sessionId}`,
          );
          this.#settle(sessionId, current, waiter, error);
          if (waiter.ticket !== undefined) this.#dropTickets(sessionId, [waiter.ticket]);
        }, waitMs),
      };
      waiter.timer.unref?.();
      current.queue.push(waiter);
      this.#startHeartbeat();
      this.#signal(sessionId);
      if (!current.running) this.#start(sessionId, current);
    });
  }

  /** Releases the leases this instance holds and fails every waiter (on store close). */
  async close(): Promise<void> {
    this.#closed = true;
    if (this.#heartbeat) clearInterval(this.#heartbeat);
    this.#heartbeat = null;
    const closing = new ThreadkeepError(
      "store_unavailable",
      "The PostgreSQL store was closed while waiting for a turn",
    );
    for (const [sessionId, line] of this.#lines) {
      for (const waiter of [...line.queue]) this.#settle(sessionId, line, waiter, closing);
      line.wake?.();
    }
    // A grant still on the wire lands in #held (or is given back) before the pool goes away.
    let timer: NodeJS.Timeout | undefined;
    const patience = new Promise((resolve) => {
      timer = setTimeout(resolve, this.#host.patienceMs);
    });
    await Promise.race([Promise.allSettled(this.#drivers), patience]);
    clearTimeout(timer);
    // Give held turns back so other processes need not wait for the lapse; best effort on the way out.
    await Promise.allSettled([...this.#held.values()].map((held) => this.#release(held)));
  }

  #start(sessionId: string, line: Line): void {
    const driver = this.#drive(sessionId, line);
    this.#drivers.add(driver);
    void driver.finally(() => this.#drivers.delete(driver));
  }

  /** One driver per session line: asks the database for the first waiter, hands out tickets in order. */
  async #drive(sessionId: string, line: Line): Promise<void> {
    line.running = true;
    let justFailed = false;
    let heldUntil: number | null = null;
    try {
      while (line.queue.length > 0 && !this.#closed) {
        const head = line.queue[0];
        line.dirty = false;
        let attempt: Attempt | null = null;
        let rows: Attempt[] = [];
        if (head.ticket === undefined || !justFailed) {
          rows = await this.#host.run(`acquireLease(${sessionId})`, async (sql) => {
            // A waiter's first try takes a free lease in the lean statement; otherwise the full one joins the line.
            if (head.ticket === undefined) {
              const quick = await tryLease(sql, sessionId, head);
              if (quick[0].fence != null) return quick;
            }
            return attemptLease(sql, sessionId, head.ticket ?? null, head);
          });
          attempt = rows[0];
          if (attempt.ticket != null) head.ticket = attempt.ticket;
          if (attempt.fence != null && this.#held.has(heldKey(sessionId, attempt.fence))) {
            attempt.fence = await this.#refence(sessionId, head.token, attempt.fence);
            if (attempt.fence === null) continue;
          }
        }
        if (attempt?.fence != null) {
          this.#grant(sessionId, line, head, rows);
          // The lease was just taken, so the next waiter cannot have it before a release wakes us.
          justFailed = true;
          heldUntil = attempt.expires_at! - attempt.now + Date.now();
          continue;
        }
        if (attempt) heldUntil = attempt.held_until == null ? null : attempt.held_until - attempt.now + Date.now();
        if (head.done && head.ticket !== undefined) this.#dropTickets(sessionId, [head.ticket]);
        await this.#host.run(`acquireLease(${sessionId})`, (sql) => this.#ticketFollowers(sql, sessionId, line));
        if (head.done) {
          justFailed = false;
          continue;
        }
        this.#listen();
        // A held lease is worth a try the moment it lapses; a free one we lost to an earlier ticket
        // comes to us by notification, or by the poll when that ticket's owner is gone.
        const untilLapse = heldUntil === null || heldUntil <= Date.now() ? POLL_MS : heldUntil - Date.now() + 1;
        await this.#sleep(line, Math.min(POLL_MS, untilLapse));
        justFailed = false;
      }
    } catch (error) {
      const failure = this.#host.fail(error, `acquireLease(${sessionId})`);
      const failed = [...line.queue];
      for (const waiter of failed) this.#settle(sessionId, line, waiter, failure);
      // Their tickets, and a grant or ticket whose answer was lost (it may still land), must not hold
      // the line until they lapse.
      this.#giveBack(
        sessionId,
        failed.map((w) => w.token),
        Math.max(...failed.map((w) => w.ttlMs), 0),
      );
    } finally {
      line.running = false;
      if (line.queue.length === 0 && this.#lines.get(sessionId) === line) this.#lines.delete(sessionId);
      else if (line.queue.length > 0 && !this.#closed) this.#start(sessionId, line);
    }
  }

  /**
   * A grant whose fence is held here already: a crash lost that earlier grant (and the sequence's
   * advance), and the fence came round again. Writes find their holder by session and fence, so the
   * new grant takes a fresh fence; the earlier holder's writes fail on its own token either way.
   * @returns the new fence, or null when the grant is gone too.
   */
  async #refence(sessionId: string, token: string, fence: number): Promise<number | null> {
    const [row] = await this.#host.run(`acquireLease(${sessionId})`, (sql) =>
      refenceLease(sql, sessionId, token, fence),
    );
    return row?.fence ?? null;
  }

  /** Gives every later waiter of the line a ticket, in their local order, in one statement. */
  async #ticketFollowers(sql: PgSql, sessionId: string, line: Line): Promise<void> {
    const missing = line.queue.filter((w) => w.ticket === undefined && !w.done);
    if (missing.length === 0) return;
    const rows = await insertTickets(sql, sessionId, missing);
    // Tickets are handed out in order (the holder names only serve giving tickets back after an outage).
    const tickets = rows.map((r) => r.ticket).sort((a, b) => a - b);
    missing.forEach((w, i) => {
      w.ticket = tickets[i];
    });
    const abandoned = missing.filter((w) => w.done).map((w) => w.ticket!);
    if (abandoned.length > 0) this.#dropTickets(sessionId, abandoned);
  }

  /** Hands the lease of a granting attempt (its row carries the turn's read, when asked) to its waiter. */
  #grant(sessionId: string, line: Line, waiter: Waiter, rows: Attempt[]): void {
    const attempt = rows[0];
    const fence = attempt.fence!;
    const held: Held = { sessionId, fence, token: waiter.token, released: false };
    this.#held.set(heldKey(sessionId, fence), held);
    if (waiter.done) {
      // Its wait ran out while the grant was on the wire: give the turn straight back (else it lapses).
      void this.#release(held).catch(() => {});
      return;
    }
    this.#settle(sessionId, line, waiter, null);
    const lease: Lease = {
      sessionId,
      fence,
      expiresAt: attempt.expires_at!,
      renew: async (ttlMs) => {
        if (held.released) return false;
        const until = await this.#renew(held, ttlMs);
        if (until === null) return false;
        lease.expiresAt = until;
        return true;
      },
      release: async () => {
        if (held.released) return;
        await this.#release(held);
        held.released = true;
      },
    };
    waiter.resolve({ lease, ...(waiter.read ? { read: attempt.turn ?? null } : {}) });
  }

  /**
   * A write with `releaseLease` gave `fence` back in its own statement (see `releaseWithWrite`): the
   * holder's lease now does nothing on release and answers false on renew, and this process's waiters
   * try at once. `waiting` (the session's live tickets when released) above this process's own
   * tickets means other processes wait: they are notified, in a statement of its own (see
   * `threadkeep_release_written` for why not in the write's).
   */
  releasedByWrite(sessionId: string, fence: number, waiting: number | null): void {
    const held = this.#held.get(heldKey(sessionId, fence));
    if (held) {
      held.released = true;
      this.#held.delete(heldKey(sessionId, fence));
    }
    const line = this.#lines.get(sessionId);
    const ours = line ? line.queue.filter((w) => w.ticket !== undefined && !w.done).length : 0;
    if (waiting !== null && waiting > ours) this.#notify(sessionId);
    this.#signal(sessionId);
  }

  /** Wakes other processes' waiters of the session; a lost notification costs them one poll. */
  #notify(sessionId: string): void {
    void this.#host
      .run(`notify waiters of ${sessionId}`, (sql) => notifyWaiters(sql, this.#host.channel, sessionId), {
        background: true,
      })
      .catch(() => {});
  }

  /**
   * The token of the lease of `fence` held here, for a write fenced by it (see `postgres/migrations/010-held-writes.ts`);
   * undefined for a fence this instance did not grant or has seen given back.
   */
  holder(sessionId: string, fence: number): string | undefined {
    return this.#held.get(heldKey(sessionId, fence))?.token;
  }

  /**
   * Extends the lease while its grant is still the session's newest: a lapsed lease nobody took
   * since is taken back, a released one (expires_at 0) is not. @returns the new lapse time, or null.
   */
  async #renew({ sessionId, fence, token }: Held, ttlMs: number): Promise<number | null> {
    const [row] = await this.#host.run(`renew lease of ${sessionId}`, (sql) =>
      renewLease(sql, sessionId, fence, token, ttlMs),
    );
    return row ? row.expires_at - row.now + Date.now() : null;
  }

  async #release(held: Held): Promise<void> {
    const { sessionId, fence, token } = held;
    await this.#host.run(`release lease of ${sessionId}`, (sql) =>
      releaseLease(sql, this.#host.channel, sessionId, fence, token),
    );
    held.released = true;
    if (this.#held.get(heldKey(sessionId, fence)) === held) this.#held.delete(heldKey(sessionId, fence));
    this.#signal(sessionId);
  }

  /**
   * Gives back what failed waiters may hold: a lease granted to one of `tokens` and their tickets,
   * including ones whose answer was lost and that land later (a connection that resumes after an
   * outage). Repeated until such a grant would have lapsed by itself.
   */
  #giveBack(sessionId: string, tokens: string[], ttlMs: number): void {
    if (tokens.length === 0) return;
    const giveUpAt = Date.now() + Math.max(ttlMs, TICKET_TTL_MS) + this.#host.patienceMs;
    let delay = 100;
    const attempt = () => {
      if (this.#closed) return;
      this.#host
        .run(`give back lease of ${sessionId}`, (sql) => giveBackLeases(sql, this.#host.channel, sessionId, tokens), {
          background: true,
        })
        .catch(() => {})
        .finally(() => {
          if (Date.now() + delay > giveUpAt) return;
          delay = Math.min(delay * 2, 1_000);
          setTimeout(attempt, delay).unref();
        });
    };
    setTimeout(attempt, delay).unref();
  }

  /** Takes a waiter out of its line; `error` null means it was granted (resolved by the caller). */
  #settle(sessionId: string, line: Line, waiter: Waiter, error: unknown): void {
    if (waiter.done) return;
    waiter.done = true;
    clearTimeout(waiter.timer);
    const at = line.queue.indexOf(waiter);
    if (at >= 0) line.queue.splice(at, 1);
    if (error !== null) waiter.reject(error);
    if (at === 0) this.#signal(sessionId);
  }

  /** Deletes tickets of waiters that left, and tells the other processes the line moved. */
  #dropTickets(sessionId: string, tickets: number[]): void {
    void this.#host
      .run(`drop tickets of ${sessionId}`, (sql) => dropTickets(sql, this.#host.channel, sessionId, tickets), {
        background: true,
      })
      // A ticket left behind lapses after TICKET_TTL_MS; nothing waits on this cleanup.
      .catch(() => {});
  }

  #signal(sessionId: string): void {
    const line = this.#lines.get(sessionId);
    if (!line) return;
    line.dirty = true;
    line.wake?.();
  }

  #sleep(line: Line, ms: number): Promise<void> {
    if (line.dirty || this.#closed) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        line.wake = null;
        resolve();
      };
      const timer = setTimeout(done, ms);
      line.wake = done;
    });
  }

  /** Starts listening for releases by other processes; polling covers the time until it works. */
  #listen(): void {
    if (this.#listening || this.#closed) return;
    this.#listening = this.#host
      .sql()
      .then((sql) => sql.listen(this.#host.channel, (sessionId) => this.#signal(sessionId)))
      .catch(() => {
        this.#listening = null;
      });
  }

  #startHeartbeat(): void {
    if (this.#heartbeat || this.#closed) return;
    this.#heartbeat = setInterval(() => {
      const tickets: number[] = [];
      for (const line of this.#lines.values()) {
        for (const w of line.queue) if (w.ticket !== undefined && !w.done) tickets.push(w.ticket);
      }
      if (this.#lines.size === 0 && this.#heartbeat) {
        clearInterval(this.#heartbeat);
        this.#heartbeat = null;
      }
      if (tickets.length === 0) return;
      // Through run(): a deadline (a beat can no longer queue unbounded on a silent connection) and, in
      // an outage, refused unsent like every operation. A missed beat only risks the place in line, not
      // the lease; the next beat or try reports outages.
      void this.#host.run("lease heartbeat", (sql) => beatTickets(sql, tickets), { background: true }).catch(() => {});
    }, HEARTBEAT_MS);
    this.#heartbeat.unref?.();
  }
}
