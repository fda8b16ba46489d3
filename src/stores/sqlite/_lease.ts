/**
 * Turn leases kept in the SQLite file (`turn_leases`, `turn_queue`, `turn_fence`), so processes that
 * share one database (`threadkeep serve --workers N`, or several servers on one machine) run a
 * session's turns one at a time, in arrival order. SQLite cannot notify another process, so a
 * waiter polls; within a process a release wakes the next waiter at once, and only the first local
 * waiter of a session polls (local tickets are taken in arrival order, so no later one can be first).
 * A turn costs two write transactions: the grant, which also reads what the turn needs
 * ({@link SqliteFileLeases.acquireAndRead}), and the commit, which gives the lease back with its
 * messages (`check` with `release`, then {@link SqliteFileLeases.releasedByWrite}).
 */
import type Database from "better-sqlite3";
import { StoreUnavailableError, ThreadkeepError } from "../../core/errors.js";
import type { Lease, LeaseOptions } from "../../core/types.js";
import { DEFAULT_LEASE_TTL_MS, DEFAULT_LEASE_WAIT_MS } from "../_lease.js";
import { BUSY, writeWhenFree } from "./_group-commit.js";

/** What the SQLite store needs of a lease keeper: {@link LocalLeases} in one process, this across processes. */
export interface TurnLeases {
  acquire(sessionId: string, options?: LeaseOptions): Promise<Lease>;
  /**
   * Inside the append's transaction. With `release` (a write with `releaseLease`), leases kept in the
   * file also give `fence` back in that transaction; the store calls `releasedByWrite` once it committed.
   * @throws `lease_expired` when a newer lease than `fence` was granted.
   */
  check(sessionId: string, fence: number | undefined, release?: boolean): void;
  /** Inside a write's transaction (a replayed one, not checked): gives `fence` back if it is still the session's lease. */
  releaseIn?(sessionId: string, fence: number): void;
  /** After a committed write that released `fence` in its transaction (see `check`): the lease then does nothing on release. */
  releasedByWrite?(sessionId: string, fence: number): void;
  /** Waits for the lease like `acquire`, then runs `read` in the grant's transaction. */
  acquireAndRead?<T>(sessionId: string, options: LeaseOptions | undefined, read: () => T): Promise<Granted<T>>;
  forget(sessionId: string): void;
  clear(): void;
}

/** A ticket not refreshed for this long belongs to a waiter that died: the line skips it. */
const TICKET_ALIVE_MS = 2_000;
/** Poll intervals of a first waiter: short at first (a turn is milliseconds), backing off under a long turn. */
const POLL_MIN_MS = 1;
const POLL_MAX_MS = 20;

/** What a read run in the grant's transaction gave: a failed read leaves the grant standing. */
export type ReadOutcome<T> = { ok: true; value: T } | { ok: false; error: unknown };

/** A granted lease, and the outcome of the read that ran with its grant. */
export interface Granted<T> {
  lease: Lease;
  read?: ReadOutcome<T>;
}

interface Waiter {
  ticket: number;
  ttlMs: number;
  read?: () => unknown;
  deadline: number;
  resolve: (granted: Granted<unknown>) => void;
  reject: (error: Error) => void;
}

interface Line {
  waiters: Waiter[];
  timer?: NodeJS.Timeout;
  delayMs: number;
  refreshedAt: number;
}

function prepare(db: Database.Database) {
  return {
    lease: db.prepare<[string], { fence: number; expires_at: number }>(
      "SELECT fence, expires_at FROM turn_leases WHERE session_id = ?",
    ),
    head: db
      .prepare<[string, number], number>(
        "SELECT ticket FROM turn_queue WHERE session_id = ? AND alive_until > ? ORDER BY ticket LIMIT 1",
      )
      .pluck(),
    enqueue: db.prepare<[string, number], unknown>("INSERT INTO turn_queue (session_id, alive_until) VALUES (?, ?)"),
    refresh: db.prepare<[number, number], unknown>("UPDATE turn_queue SET alive_until = ? WHERE ticket = ?"),
    dequeue: db.prepare<[number], unknown>("DELETE FROM turn_queue WHERE ticket = ?"),
    dropDead: db.prepare<[string, number], unknown>("DELETE FROM turn_queue WHERE session_id = ? AND alive_until <= ?"),
    nextFence: db.prepare<[], number>("UPDATE turn_fence SET next = next + 1 WHERE id = 1 RETURNING next - 1").pluck(),
    grant: db.prepare<[string, number, number], unknown>(
      `INSERT INTO turn_leases (session_id, fence, expires_at) VALUES (?, ?, ?)
       ON CONFLICT (session_id) DO UPDATE SET fence = excluded.fence, expires_at = excluded.expires_at`,
    ),
    release: db.prepare<[string, number], unknown>(
      "UPDATE turn_leases SET expires_at = 0 WHERE session_id = ? AND fence = ?",
    ),
    // A lapsed lease nobody took since (same fence) is taken back; a released one (expires_at 0) is not.
    renew: db.prepare<[number, string, number], unknown>(
      "UPDATE turn_leases SET expires_at = ? WHERE session_id = ? AND fence = ? AND expires_at > 0",
    ),
    forget: db.prepare<[string, number], unknown>("DELETE FROM turn_leases WHERE session_id = ? AND expires_at <= ?"),
  };
}

type Statements = ReturnType<typeof prepare>;

/** The prepared statements and the two write transactions of one open database. */
interface Prepared {
  st: Statements;
  /**
   * Grants the lease to `ticket` (or, with null, to a caller not in line) if it is free and first,
   * and runs `read` in the same transaction. @returns the fence and the read, or null.
   */
  take(id: string, ticket: number | null, ttlMs: number, read?: () => unknown): Taken | null;
  /** Takes the lease at once (with `read`) if nobody holds it or waits; else a ticket in the line. */
  enter(id: string, ttlMs: number, read?: () => unknown): Taken | { ticket: number };
}

interface Taken {
  fence: number;
  read?: ReadOutcome<unknown>;
}

const ticketOf = (result: { lastInsertRowid: number | bigint }) => Number(result.lastInsertRowid);

/** Runs a function on the store's open database (opening it on first use). */
type Use = <T>(fn: (db: Database.Database) => T) => T;

/** Queues a write for the store's group commit: writes of one event-loop turn share one transaction. */
type Group = <T>(fn: (db: Database.Database) => T) => Promise<T>;

/**
 * Leases in the database file. `use` runs a function on the store's open database; `tryUse` runs a
 * write there without waiting for another process's write lock ({@link BUSY} then), so a grant that
 * finds the lock taken tries again with the event loop free instead of sleeping in SQLite's busy handler.
 * With `group`, an acquire enters through the store's group commit: the grants (and reads) of the turns
 * that arrived in one event-loop turn, and the commits that finished in it, share one write
 * transaction, so each pays a savepoint where it paid a BEGIN, a COMMIT and a WAL write, and the other
 * process's page cache is dropped once per group instead of once per grant.
 */
export class SqliteFileLeases implements TurnLeases {
  readonly #use: Use;
  readonly #tryUse: <T>(fn: (db: Database.Database) => T) => T | typeof BUSY;
  readonly #prepared = new WeakMap<Database.Database, Prepared>();
  readonly #lines = new Map<string, Line>();
  /** Leases granted here and not yet given back, by fence (fences are unique across sessions). */
  readonly #granted = new Map<number, { sessionId: string; released: boolean }>();
  /** Sessions whose acquire is still trying to enter (the lock was taken): later acquires of the session wait behind it. */
  readonly #entering = new Map<string, Promise<void>>();

  readonly #group: Group | undefined;

  constructor(use: Use, tryUse: <T>(fn: (db: Database.Database) => T) => T | typeof BUSY = use, group?: Group) {
    this.#use = use;
    this.#tryUse = tryUse;
    this.#group = group;
  }

  #on<T>(fn: (p: Prepared) => T): T {
    return this.#use((db) => fn(this.#prepare(db)));
  }

  /** {@link #on} for one write transaction or statement, {@link BUSY} when another process holds the lock. */
  #tryOn<T>(fn: (p: Prepared) => T): T | typeof BUSY {
    return this.#tryUse((db) => fn(this.#prepare(db)));
  }

  #prepare(db: Database.Database): Prepared {
    let p = this.#prepared.get(db);
    if (!p) {
      const st = prepare(db);
      // The grant: the lease is free (released or lapsed) and `ticket` is first of the live line
      // (or, with no ticket, the line is empty). IMMEDIATE, so two processes never both see it free.
      // The turn's read runs in the grant's transaction, so it sees the session as it was when granted.
      const takeTx = db.transaction(
        (id: string, ticket: number | null, ttlMs: number, read?: () => unknown): Taken | null => {
          const now = Date.now();
          const held = st.lease.get(id);
          if (held && held.expires_at > now) return null;
          st.dropDead.run(id, now);
          const head = st.head.get(id, now);
          if (head !== undefined && head !== ticket) return null;
          if (ticket !== null) st.dequeue.run(ticket);
          const fence = st.nextFence.get()!;
          st.grant.run(id, fence, now + ttlMs);
          if (!read) return { fence };
          try {
            return { fence, read: { ok: true, value: read() } };
          } catch (error) {
            // A failure that ended the transaction (I/O) took the grant with it: nothing is held.
            if (!db.inTransaction) throw error;
            return { fence, read: { ok: false, error } };
          }
        },
      );
      const enterTx = db.transaction((id: string, ttlMs: number, read?: () => unknown) => {
        const taken = takeTx(id, null, ttlMs, read);
        if (taken !== null) return taken;
        return { ticket: ticketOf(st.enqueue.run(id, Date.now() + TICKET_ALIVE_MS)) };
      });
      p = {
        st,
        take: (id, ticket, ttlMs, read) => takeTx.immediate(id, ticket, ttlMs, read),
        enter: (id, ttlMs, read) => enterTx.immediate(id, ttlMs, read),
      };
      this.#prepared.set(db, p);
    }
    return p;
  }

  async acquire(sessionId: string, options: LeaseOptions = {}): Promise<Lease> {
    return (await this.#acquire(sessionId, options)).lease;
  }

  acquireAndRead<T>(sessionId: string, options: LeaseOptions = {}, read: () => T): Promise<Granted<T>> {
    return this.#acquire(sessionId, options, read) as Promise<Granted<T>>;
  }

  async #acquire(sessionId: string, options: LeaseOptions, read?: () => unknown): Promise<Granted<unknown>> {
    const ttlMs = options.ttlMs ?? DEFAULT_LEASE_TTL_MS;
    const waitMs = options.waitMs ?? DEFAULT_LEASE_WAIT_MS;
    const before = this.#entering.get(sessionId);
    let done!: () => void;
    const mine = new Promise<void>((resolve) => (done = resolve));
    this.#entering.set(sessionId, mine);
    try {
      // An earlier acquire of this session still trying to enter goes first: arrival order holds.
      if (before) await before;
      // Behind a local waiter, go straight into the line: the fast path would see its ticket anyway.
      const enter = (p: Prepared) => {
        const line = this.#lines.get(sessionId);
        return line && line.waiters.length > 0
          ? { ticket: this.#enqueue(p.st, sessionId) }
          : p.enter(sessionId, ttlMs, read);
      };
      // The group commit tries again itself while another process holds the lock.
      let entered = this.#group ? await this.#group((db) => enter(this.#prepare(db))) : this.#tryOn(enter);
      if (entered === BUSY)
        entered = await writeWhenFree(
          () => this.#tryOn(enter),
          () => this.#on(enter),
        );
      return this.#entered(sessionId, entered, ttlMs, waitMs, read);
    } finally {
      done();
      if (this.#entering.get(sessionId) === mine) this.#entering.delete(sessionId);
    }
  }

  /** The lease when entering granted it; else a place in the local line, which polls for it. */
  #entered(
    sessionId: string,
    entered: Taken | { ticket: number },
    ttlMs: number,
    waitMs: number,
    read?: () => unknown,
  ): Granted<unknown> | Promise<Granted<unknown>> {
    if ("fence" in entered) return { lease: this.#lease(sessionId, entered.fence, ttlMs), read: entered.read };
    return new Promise<Granted<unknown>>((resolve, reject) => {
      let current = this.#lines.get(sessionId);
      if (!current) {
        current = { waiters: [], delayMs: POLL_MIN_MS, refreshedAt: Date.now() };
        this.#lines.set(sessionId, current);
      }
      current.waiters.push({ ticket: entered.ticket, ttlMs, read, deadline: Date.now() + waitMs, resolve, reject });
      this.#schedule(sessionId, current, 0);
    });
  }

  #enqueue(st: Statements, sessionId: string): number {
    return ticketOf(st.enqueue.run(sessionId, Date.now() + TICKET_ALIVE_MS));
  }

  check(sessionId: string, fence: number | undefined, release = false): void {
    if (fence === undefined) return;
    this.#on((p) => {
      const held = p.st.lease.get(sessionId);
      if (held && held.fence > fence) {
        throw new ThreadkeepError("lease_expired", `The turn lease of session ${sessionId} expired and was taken over`);
      }
      if (release) p.st.release.run(sessionId, fence);
    });
  }

  releaseIn(sessionId: string, fence: number): void {
    this.#on((p) => p.st.release.run(sessionId, fence));
  }

  releasedByWrite(sessionId: string, fence: number): void {
    const granted = this.#granted.get(fence);
    if (granted?.sessionId !== sessionId) return;
    granted.released = true;
    this.#granted.delete(fence);
    const line = this.#lines.get(sessionId);
    if (line) this.#schedule(sessionId, line, 0);
  }

  forget(sessionId: string): void {
    // Fences come from one counter, so dropping a session's row never lets an old fence pass again.
    if (!this.#lines.has(sessionId)) this.#on((p) => p.st.forget.run(sessionId, Date.now()));
  }

  clear(): void {
    for (const [sessionId, line] of this.#lines) {
      clearTimeout(line.timer);
      for (const waiter of line.waiters) {
        waiter.reject(
          new StoreUnavailableError(`The sqlite store closed while session ${sessionId} waited for its turn`),
        );
      }
    }
    this.#lines.clear();
    this.#granted.clear();
  }

  #lease(sessionId: string, fence: number, ttlMs: number): Lease {
    const granted = { sessionId, released: false };
    this.#granted.set(fence, granted);
    const lease: Lease = {
      sessionId,
      fence,
      expiresAt: Date.now() + ttlMs,
      renew: async (renewMs) => {
        if (granted.released) return false;
        const until = Date.now() + renewMs;
        const { changes } = this.#on((p) => p.st.renew.run(until, sessionId, fence)) as { changes: number };
        if (changes === 0) return false;
        lease.expiresAt = until;
        return true;
      },
      release: async () => {
        if (granted.released) return;
        granted.released = true;
        this.#granted.delete(fence);
        this.#on((p) => p.st.release.run(sessionId, fence));
        const line = this.#lines.get(sessionId);
        if (line) this.#schedule(sessionId, line, 0);
      },
    };
    return lease;
  }

  #schedule(sessionId: string, line: Line, delayMs: number): void {
    clearTimeout(line.timer);
    if (delayMs === 0) line.delayMs = POLL_MIN_MS;
    line.timer = setTimeout(() => this.#poll(sessionId, line), delayMs);
  }

  #poll(sessionId: string, line: Line): void {
    line.timer = undefined;
    const now = Date.now();
    try {
      this.#on((p) => {
        for (const waiter of line.waiters.filter((w) => w.deadline <= now)) {
          line.waiters.splice(line.waiters.indexOf(waiter), 1);
          p.st.dequeue.run(waiter.ticket);
          waiter.reject(new ThreadkeepError("session_busy", `Timed out waiting for the turn of session ${sessionId}`));
        }
        if (now - line.refreshedAt > TICKET_ALIVE_MS / 4) {
          line.refreshedAt = now;
          let lost = false;
          for (const waiter of line.waiters)
            lost = p.st.refresh.run(now + TICKET_ALIVE_MS, waiter.ticket).changes === 0 || lost;
          // A stall longer than a ticket's life let another process drop them: back into line, in order.
          if (lost)
            for (const waiter of line.waiters) {
              p.st.dequeue.run(waiter.ticket);
              waiter.ticket = this.#enqueue(p.st, sessionId);
            }
        }
        const first = line.waiters[0];
        if (!first) return;
        // A cheap read first; the write transaction only when the lease looks free.
        const held = p.st.lease.get(sessionId);
        if (held && held.expires_at > now) return;
        // Another process writing now: polled again, the event loop free meanwhile.
        const taken = this.#tryOn((q) => q.take(sessionId, first.ticket, first.ttlMs, first.read));
        if (taken === null || taken === BUSY) return;
        line.waiters.shift();
        line.delayMs = POLL_MIN_MS;
        first.resolve({ lease: this.#lease(sessionId, taken.fence, first.ttlMs), read: taken.read });
      });
    } catch (error) {
      for (const waiter of line.waiters.splice(0)) waiter.reject(error as Error);
    }
    if (line.waiters.length === 0) {
      if (this.#lines.get(sessionId) === line) this.#lines.delete(sessionId);
      return;
    }
    const delay = line.delayMs;
    line.delayMs = Math.min(POLL_MAX_MS, line.delayMs * 2);
    this.#schedule(sessionId, line, delay);
  }
}
