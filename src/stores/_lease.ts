import { ThreadkeepError } from "../core/errors.js";
import type { Lease, LeaseOptions } from "../core/types.js";

/** Default lease lifetime and queue wait. */
export const DEFAULT_LEASE_TTL_MS = 30_000;
export const DEFAULT_LEASE_WAIT_MS = 30_000;

interface Waiter {
  ttlMs: number;
  grant: (lease: Lease) => void;
  timer: NodeJS.Timeout;
}

interface Line {
  holder: { fence: number; expiresAt: number; timer: NodeJS.Timeout } | null;
  queue: Waiter[];
  /** The newest fence granted on this session. */
  latestFence: number;
}

/**
 * Turn leases held in this process: FIFO per session, with a lifetime after which the next waiter
 * is served and the old holder's fence goes stale. Used by the stores whose data lives in one process
 * (memory, file, sqlite).
 */
export class LocalLeases {
  /** Fences increase across all sessions, so a forgotten line never lets a stale fence pass. */
  #nextFence = 1;
  #lines = new Map<string, Line>();

  acquire(sessionId: string, options: LeaseOptions = {}): Promise<Lease> {
    const ttlMs = options.ttlMs ?? DEFAULT_LEASE_TTL_MS;
    const waitMs = options.waitMs ?? DEFAULT_LEASE_WAIT_MS;
    let line = this.#lines.get(sessionId);
    if (!line) {
      line = { holder: null, queue: [], latestFence: 0 };
      this.#lines.set(sessionId, line);
    }
    if (!line.holder && line.queue.length === 0) return Promise.resolve(this.#grant(sessionId, line, ttlMs));
    return new Promise<Lease>((resolve, reject) => {
      const waiter: Waiter = {
        ttlMs,
        grant: resolve,
        timer: setTimeout(() => {
          const current = this.#lines.get(sessionId);
          const at = current ? current.queue.indexOf(waiter) : -1;
          if (current && at >= 0) current.queue.splice(at, 1);
          reject(
            new ThreadkeepError(
              "session_busy",
              `Timed out after ${waitMs} ms waiting for the turn of session ${sessionId}`,
            ),
          );
        }, waitMs),
      };
      waiter.timer.unref?.();
      line.queue.push(waiter);
    });
  }

  /** @throws `lease_expired` when a newer lease than `fence` was granted on the session. */
  check(sessionId: string, fence: number | undefined): void {
    if (fence === undefined) return;
    const line = this.#lines.get(sessionId);
    if (line && line.latestFence > fence) {
      throw new ThreadkeepError("lease_expired", `The turn lease of session ${sessionId} expired and was taken over`);
    }
  }

  /** Forgets a deleted session's line; its fence history goes with it. */
  forget(sessionId: string): void {
    const line = this.#lines.get(sessionId);
    if (line && !line.holder && line.queue.length === 0) this.#lines.delete(sessionId);
  }

  /** Drops every waiter and holder (on store close). */
  clear(): void {
    for (const line of this.#lines.values()) {
      if (line.holder) clearTimeout(line.holder.timer);
      for (const waiter of line.queue) clearTimeout(waiter.timer);
    }
    this.#lines.clear();
  }

  #grant(sessionId: string, line: Line, ttlMs: number): Lease {
    const fence = this.#nextFence++;
    const expiresAt = Date.now() + ttlMs;
    const timer = setTimeout(() => this.#release(sessionId, fence), ttlMs);
    timer.unref?.();
    line.holder = { fence, expiresAt, timer };
    line.latestFence = fence;
    let released = false;
    const lease: Lease = {
      sessionId,
      fence,
      expiresAt,
      renew: async (renewMs) => {
        if (released) return false;
        const until = this.#renew(sessionId, fence, renewMs);
        if (until === null) return false;
        lease.expiresAt = until;
        return true;
      },
      release: async () => {
        if (released) return;
        released = true;
        this.#release(sessionId, fence);
      },
    };
    return lease;
  }

  /** Extends the holder's lifetime, or takes a lapsed lease back if nobody was granted it since. */
  #renew(sessionId: string, fence: number, ttlMs: number): number | null {
    const line = this.#lines.get(sessionId);
    if (!line || line.latestFence !== fence) return null;
    if (line.holder && line.holder.fence !== fence) return null;
    if (line.holder) clearTimeout(line.holder.timer);
    const expiresAt = Date.now() + ttlMs;
    const timer = setTimeout(() => this.#release(sessionId, fence), ttlMs);
    timer.unref?.();
    line.holder = { fence, expiresAt, timer };
    return expiresAt;
  }

  #release(sessionId: string, fence: number): void {
    const line = this.#lines.get(sessionId);
    if (!line?.holder || line.holder.fence !== fence) return;
    clearTimeout(line.holder.timer);
    line.holder = null;
    const next = line.queue.shift();
    if (next) {
      clearTimeout(next.timer);
      next.grant(this.#grant(sessionId, line, next.ttlMs));
    }
  }
}
