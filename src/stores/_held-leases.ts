import type { Lease } from "../core/types.js";

/**
 * The leases a store granted and its holders still hold, by session and fence, so that a write with
 * `releaseLease` can give its turn's lease back right after it applies (stores whose leases live in
 * the process or its database, where that needs no round trip of its own).
 */
export class HeldLeases {
  readonly #held = new Map<string, Lease>();

  /** Wraps a granted lease so it is found by {@link releaseAfterWrite} until it is released. */
  track(lease: Lease): Lease {
    const key = `${lease.sessionId}\n${lease.fence}`;
    const held = this.#held;
    const tracked: Lease = {
      sessionId: lease.sessionId,
      fence: lease.fence,
      get expiresAt() {
        return lease.expiresAt;
      },
      set expiresAt(value: number) {
        lease.expiresAt = value;
      },
      renew: (ttlMs) => lease.renew(ttlMs),
      release: async () => {
        held.delete(key);
        await lease.release();
      },
    };
    held.set(key, tracked);
    return tracked;
  }

  /**
   * Releases the lease of `fence` after a write that asked for it applied. The write stands whatever
   * happens here: a release that fails is left to the holder's own `release()`, which it retries.
   */
  async releaseAfterWrite(sessionId: string, options: { fence?: number; releaseLease?: boolean }): Promise<void> {
    if (!options.releaseLease || options.fence === undefined) return;
    const lease = this.#held.get(`${sessionId}\n${options.fence}`);
    if (!lease) return;
    try {
      await lease.release();
    } catch {
      this.#held.set(`${sessionId}\n${options.fence}`, lease);
    }
  }
}
