import { randomUUID } from "node:crypto";
import { ThreadkeepError } from "../core/errors.js";
import type { Lease, LeaseOptions } from "../core/types.js";
import { DEFAULT_LEASE_TTL_MS, DEFAULT_LEASE_WAIT_MS } from "./_lease.js";

/** What the lease line needs from the store: the three lease scripts, per session. */
export interface LeaseBackend {
  /** Joins or stays in line; `granted` with the fence, or the position in line. */
  poll(sessionId: string, token: string, ttlMs: number): Promise<{ granted: boolean; value: number }>;
  leave(sessionId: string, token: string): Promise<void>;
  release(sessionId: string, token: string): Promise<void>;
}

/** How long a waiter may go without polling before the others drop it from the line. */
export const LEASE_HEARTBEAT_GRACE_MS = 2_000;

/**
 * The next poll: the waiter first in line polls every 2 ms so a handoff from another process is quick;
 * waiters further back poll less often, so a long line costs the server little.
 */
function pollDelay(position: number): number {
  return Math.min(2 + 2 * position, 25);
}

/**
 * The turn lease over Redis: SET NX PX with a random token, a FIFO line per session kept on the
 * server (tickets plus heartbeats), and a fence per grant. Waiters poll; a release in this process
 * wakes this process's waiters at once.
 */
export class RedisLeases {
  readonly #backend: LeaseBackend;
  /** Sleeping waiters by session, woken early when a lease of that session is released here. */
  readonly #sleepers = new Map<string, Set<() => void>>();
  /** Leases held through this store, released on close so the next in line need not wait out the TTL. */
  readonly #held = new Set<Lease>();
  #closed = false;

  constructor(backend: LeaseBackend) {
    this.#backend = backend;
  }

  async acquire(sessionId: string, options: LeaseOptions = {}): Promise<Lease> {
    const ttlMs = Math.max(1, Math.floor(options.ttlMs ?? DEFAULT_LEASE_TTL_MS));
    const waitMs = options.waitMs ?? DEFAULT_LEASE_WAIT_MS;
    const token = randomUUID();
    const deadline = Date.now() + waitMs;
    for (;;) {
      this.#ensureOpen();
      const sentAt = Date.now();
      let reply: { granted: boolean; value: number };
      try {
        reply = await this.#backend.poll(sessionId, token, ttlMs);
      } catch (error) {
        // Best effort: a waiter that is not removed drops out when its heartbeat lapses.
        this.#backend.leave(sessionId, token).catch(() => {});
        throw error;
      }
      if (reply.granted) return this.#lease(sessionId, token, reply.value, sentAt + ttlMs);
      const left = deadline - Date.now();
      if (left <= 0) {
        await this.#backend.leave(sessionId, token).catch(() => {});
        throw new ThreadkeepError(
          "session_busy",
          `Timed out after ${waitMs} ms waiting for the turn of session ${sessionId}`,
        );
      }
      await this.#sleep(sessionId, Math.min(pollDelay(reply.value), left));
    }
  }

  /** Stops every waiter and releases the leases held here. */
  async close(): Promise<void> {
    this.#closed = true;
    for (const wakers of this.#sleepers.values()) for (const wake of wakers) wake();
    await Promise.allSettled([...this.#held].map((lease) => lease.release()));
  }

  #ensureOpen(): void {
    if (this.#closed) throw new ThreadkeepError("store_unavailable", "The redis store is closed");
  }

  #lease(sessionId: string, token: string, fence: number, expiresAt: number): Lease {
    let released: Promise<void> | undefined;
    const lease: Lease = {
      sessionId,
      fence,
      expiresAt,
      release: () => {
        released ??= this.#backend.release(sessionId, token).then(
          () => {
            this.#held.delete(lease);
            this.#wake(sessionId);
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
    this.#held.add(lease);
    return lease;
  }

  #wake(sessionId: string): void {
    const wakers = this.#sleepers.get(sessionId);
    if (wakers) for (const wake of [...wakers]) wake();
  }

  #sleep(sessionId: string, ms: number): Promise<void> {
    return new Promise((resolve) => {
      let wakers = this.#sleepers.get(sessionId);
      if (!wakers) {
        wakers = new Set();
        this.#sleepers.set(sessionId, wakers);
      }
      const done = () => {
        clearTimeout(timer);
        wakers.delete(done);
        if (wakers.size === 0 && this.#sleepers.get(sessionId) === wakers) this.#sleepers.delete(sessionId);
        resolve();
      };
      const timer = setTimeout(done, ms);
      wakers.add(done);
    });
  }
}
