import { randomUUID } from "node:crypto";
import { isOutcomeUnknown, isThreadkeepError, ThreadkeepError } from "../../core/errors.js";
import type { Lease, LeaseOptions, TurnOpening } from "../../core/types.js";
import { DEFAULT_LEASE_TTL_MS, DEFAULT_LEASE_WAIT_MS } from "../_lease.js";

/** What the lease line needs from the store: the lease scripts and the wake channel, per session. */
export interface LeaseBackend {
  /**
   * Joins or stays in line; `granted` with the fence, or the position in line. With `opening`, the
   * poll that grants also reads what the turn needs (`read`, as the backend encodes it).
   */
  poll(sessionId: string, token: string, ttlMs: number, opening?: TurnOpening): Promise<PollReply>;
  leave(sessionId: string, token: string): Promise<void>;
  /** Extends the lease `token` holds (or takes it back if it lapsed untaken); false when another has it. */
  renew(sessionId: string, token: string, ttlMs: number, fence: number): Promise<boolean>;
  /** Releases if `token` holds the lease; resolves to the token of the waiter now first in line. */
  release(sessionId: string, token: string): Promise<string | null>;
  /** Starts delivering the session's wake messages (a waiter's token) to `onWake`; best effort. */
  watch(sessionId: string, onWake: (token: string) => void): void;
  unwatch(sessionId: string): void;
}

/** A poll's answer: see {@link LeaseBackend.poll}. */
export interface PollReply {
  granted: boolean;
  value: number;
  read?: unknown[];
}

/** A lease held through this store, as a write that releases it (`releaseLease`) needs it. */
interface Held {
  lease: Lease;
  token: string;
  /** The session's owner as read when the lease was granted with the turn's data. */
  owner?: string;
  /** Marks the lease released by a write: its own release does nothing then, its renew answers false. */
  released(): void;
}

/** How long a waiter whose poll went unanswered keeps trying to leave the line (and give back a lost grant). */
const LEAVE_RETRY_MS = 30_000;

const heldKey = (sessionId: string, fence: number) => `${sessionId}\n${fence}`;

/** How long a waiter may go without polling before the others drop it from the line. */
export const LEASE_HEARTBEAT_GRACE_MS = 3_000;

/**
 * The next poll when no wake message comes. A release wakes the waiter first in line at once, so
 * polls only catch what sends no message (a lease that lapsed, a waiter that gave up or died) and keep
 * this waiter's heartbeat fresh; the first in line checks more often because a lapse concerns it.
 */
function pollDelay(position: number): number {
  return position === 0 ? 25 : 300 + Math.floor(Math.random() * 200);
}

/**
 * The turn lease over Redis: SET NX PX with a random token, a FIFO line per session kept on the
 * server (tickets plus heartbeats), a fence per grant, and wake messages naming the next waiter.
 */
export class RedisLeases {
  readonly #backend: LeaseBackend;
  /** Sleeping waiters of this store by session and token. */
  readonly #waiting = new Map<string, Map<string, () => void>>();
  /** Leases held through this store by session and fence, released on close so the next in line need not wait out the TTL. */
  readonly #held = new Map<string, Held>();
  #closed = false;

  constructor(backend: LeaseBackend) {
    this.#backend = backend;
  }

  async acquire(sessionId: string, options: LeaseOptions = {}): Promise<Lease> {
    return (await this.#acquire(sessionId, options)).lease;
  }

  /**
   * Waits for the lease like {@link acquire}; the poll that grants it reads the turn's data too (one
   * round trip when nobody is ahead). `owner` of the result, once the caller knows it, is kept with
   * the lease for the write that releases it.
   */
  async open(
    sessionId: string,
    opening: TurnOpening,
  ): Promise<{ lease: Lease; read: unknown[]; setOwner(userId: string): void }> {
    const { lease, read } = await this.#acquire(sessionId, opening.lease ?? {}, opening);
    const held = this.#held.get(heldKey(sessionId, lease.fence));
    return {
      lease,
      read: read ?? [],
      setOwner: (userId) => {
        if (held) held.owner = userId;
      },
    };
  }

  /** The token (and owner, when known) of the lease of `fence` held here, for a write that releases it. */
  holder(sessionId: string, fence: number): { token: string; owner?: string } | undefined {
    const held = this.#held.get(heldKey(sessionId, fence));
    return held && { token: held.token, owner: held.owner };
  }

  /**
   * A write released the lease of `fence` (see {@link holder}): the holder's release has nothing
   * left to do and its renew answers false; `next`, the waiter the write woke, may be in this store.
   */
  releasedByWrite(sessionId: string, fence: number, next: string | null): void {
    this.#held.get(heldKey(sessionId, fence))?.released();
    this.#wake(sessionId, next);
  }

  async #acquire(
    sessionId: string,
    options: LeaseOptions,
    opening?: TurnOpening,
  ): Promise<{ lease: Lease; read?: unknown[] }> {
    const ttlMs = Math.max(1, Math.floor(options.ttlMs ?? DEFAULT_LEASE_TTL_MS));
    const waitMs = options.waitMs ?? DEFAULT_LEASE_WAIT_MS;
    const token = randomUUID();
    const deadline = Date.now() + waitMs;
    let wake: (() => void) | undefined;
    // A wake message may arrive while the poll is in flight; it must not be lost.
    let rung = false;
    const ring = () => {
      if (wake) wake();
      else rung = true;
    };
    try {
      for (let polls = 0; ; polls++) {
        this.#ensureOpen();
        const sentAt = Date.now();
        const reply = await this.#backend.poll(sessionId, token, ttlMs, opening);
        if (reply.granted)
          return { lease: this.#lease(sessionId, token, reply.value, sentAt + ttlMs), read: reply.read };
        if (polls === 0) this.#enlist(sessionId, token, ring);
        const left = deadline - Date.now();
        if (left <= 0) {
          await this.#backend.leave(sessionId, token).catch(() => {});
          throw new ThreadkeepError(
            "session_busy",
            `Timed out after ${waitMs} ms waiting for the turn of session ${sessionId}`,
          );
        }
        if (rung) {
          rung = false;
          continue;
        }
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, Math.min(pollDelay(reply.value), left));
          wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        wake = undefined;
      }
    } catch (error) {
      // A waiter that is not removed drops out when its heartbeat lapses; a poll whose answer was
      // lost may have granted it the lease, which `leave` gives back: retried until the store answers.
      if (!isThreadkeepError(error, "session_busy")) this.#leave(sessionId, token, isOutcomeUnknown(error));
      throw error;
    } finally {
      this.#discharge(sessionId, token);
    }
  }

  /** Stops every waiter and releases the leases held here. */
  async close(): Promise<void> {
    this.#closed = true;
    for (const line of this.#waiting.values()) for (const wake of line.values()) wake();
    await Promise.allSettled([...this.#held.values()].map((held) => held.lease.release()));
  }

  #leave(sessionId: string, token: string, retry: boolean): void {
    const giveUpAt = Date.now() + LEAVE_RETRY_MS;
    let delay = 100;
    const attempt = () => {
      this.#backend.leave(sessionId, token).catch(() => {
        if (!retry || this.#closed || Date.now() + delay > giveUpAt) return;
        delay = Math.min(delay * 2, 1_000);
        setTimeout(attempt, delay).unref();
      });
    };
    attempt();
  }

  #ensureOpen(): void {
    if (this.#closed) throw new ThreadkeepError("store_unavailable", "The redis store is closed");
  }

  #enlist(sessionId: string, token: string, wake: () => void): void {
    let line = this.#waiting.get(sessionId);
    if (!line) {
      line = new Map();
      this.#waiting.set(sessionId, line);
      this.#backend.watch(sessionId, (next) => this.#wake(sessionId, next));
    }
    line.set(token, wake);
  }

  #discharge(sessionId: string, token: string): void {
    const line = this.#waiting.get(sessionId);
    if (!line?.delete(token) || line.size > 0) return;
    this.#waiting.delete(sessionId);
    this.#backend.unwatch(sessionId);
  }

  #wake(sessionId: string, token: string | null): void {
    if (token) this.#waiting.get(sessionId)?.get(token)?.();
  }

  #lease(sessionId: string, token: string, fence: number, expiresAt: number): Lease {
    let released: Promise<void> | undefined;
    const key = heldKey(sessionId, fence);
    const lease: Lease = {
      sessionId,
      fence,
      expiresAt,
      renew: async (ttlMs) => {
        if (released) return false;
        const sentAt = Date.now();
        const held = await this.#backend.renew(sessionId, token, Math.max(1, Math.floor(ttlMs)), fence);
        if (held) lease.expiresAt = sentAt + ttlMs;
        return held;
      },
      release: () => {
        released ??= this.#backend.release(sessionId, token).then(
          (next) => {
            this.#held.delete(key);
            // The next waiter may be in this store: no need to wait for the message to come round.
            this.#wake(sessionId, next);
          },
          (error: unknown) => {
            // A failed release may be retried; if it never succeeds the lease lapses after its TTL.
            released = undefined;
            throw error;
          },
        );
        return released;
      },
    };
    this.#held.set(key, {
      lease,
      token,
      released: () => {
        released = Promise.resolve();
        this.#held.delete(key);
      },
    });
    return lease;
  }
}
