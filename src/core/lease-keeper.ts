/**
 * Keeps a turn lease alive while its turn runs, and gives it back even when the store is briefly away.
 * One piece for every backend: stores only provide `renew` and `release`; when and how often they are
 * called is decided here.
 */
import type { Lease } from "./types.js";

/** Options of {@link keepLease}. */
export interface LeaseKeeperOptions {
  /** The lifetime each beat renews the lease for. */
  ttlMs: number;
  /** Time between beats; a third of the lifetime, so two beats may fail before the lease lapses. @default ttlMs / 3 */
  intervalMs?: number;
  /** Where problems are reported. @default console.warn */
  warn?: (message: string) => void;
}

/** A lease being kept by {@link keepLease}. */
export interface KeptLease {
  /** True once the store said another holder was granted the session: this turn's fence is stale. */
  readonly lost: boolean;
  /**
   * Stops the heartbeat, waiting for a beat on the wire: before a write that releases the lease
   * itself (`releaseLease`), so no late renew can take the lease back after it.
   */
  stop(): Promise<void>;
  /**
   * Stops the heartbeat and releases the lease. Never throws: a release the store did not take is
   * retried in the background until it succeeds or the lease has lapsed anyway.
   */
  release(): Promise<void>;
}

/** Longest wait between two tries of a failed renew or release: the store is back within this of its return. */
const RETRY_MAX_MS = 1_000;
const RETRY_FIRST_MS = 100;

/**
 * Renews `lease` every `intervalMs` until {@link KeptLease.release}. A failed beat is tried again
 * sooner; a beat the store refuses (another holder) ends the heartbeat. Timers never keep the process alive.
 */
export function keepLease(lease: Lease, options: LeaseKeeperOptions): KeptLease {
  const ttlMs = Math.max(1, options.ttlMs);
  const intervalMs = Math.max(1, options.intervalMs ?? Math.floor(ttlMs / 3));
  const warn = options.warn ?? ((message: string) => console.warn(`[threadkeep] ${message}`));
  let stopped = false;
  let lost = false;
  let timer: NodeJS.Timeout | undefined;
  let beating: Promise<void> = Promise.resolve();

  const schedule = (ms: number) => {
    if (stopped || lost) return;
    timer = setTimeout(() => {
      beating = beat();
    }, ms);
    timer.unref?.();
  };
  let failing = false;
  const beat = async () => {
    try {
      const held = await lease.renew(ttlMs);
      failing = false;
      if (stopped) return;
      if (!held) {
        lost = true;
        warn(`the turn lease of session ${lease.sessionId} was taken over; this turn will not be saved`);
        return;
      }
      schedule(intervalMs);
    } catch (error) {
      // The store is away: keep trying, faster than the lifetime runs out, so a short outage costs nothing.
      schedule(Math.min(intervalMs, RETRY_MAX_MS));
      if (!stopped && !failing)
        warn(`renewing the turn lease of session ${lease.sessionId} failed, retrying: ${error}`);
      failing = true;
    }
  };
  schedule(intervalMs);
  const stop = async () => {
    stopped = true;
    clearTimeout(timer);
    await beating;
  };

  return {
    get lost() {
      return lost;
    },
    stop,
    async release() {
      // A renew on the wire must not land after the release and take the lease back.
      await stop();
      try {
        await lease.release();
      } catch (error) {
        warn(`releasing the turn lease of session ${lease.sessionId} failed, retrying: ${error}`);
        retryRelease(lease, ttlMs, warn);
      }
    },
  };
}

/**
 * Tries a failed release again with backoff until the store takes it. Past the lease's lapse (plus one
 * lifetime, for a renew whose answer was lost) the store has let it go by itself: stop then.
 */
function retryRelease(lease: Lease, ttlMs: number, warn: (message: string) => void): void {
  const giveUpAt = lease.expiresAt + ttlMs;
  let delay = RETRY_FIRST_MS;
  const attempt = () => {
    lease.release().catch((error) => {
      if (Date.now() + delay > giveUpAt) {
        warn(`gave up releasing the turn lease of session ${lease.sessionId} (it lapses by itself): ${error}`);
        return;
      }
      delay = Math.min(delay * 2, RETRY_MAX_MS);
      setTimeout(attempt, delay).unref?.();
    });
  };
  setTimeout(attempt, delay).unref?.();
}
