import type { Lease, OpenedTurn, Session, SessionState, TurnOpening } from "../core/types.js";

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

/** What a turn reads besides its lease. */
export type TurnRead = Omit<OpenedTurn, "lease">;

const EMPTY_STATE: SessionState = { version: 0, data: {} };

/**
 * The turn read of `session` for `opening`'s owner: only this owner's active session is read
 * (`read`), anything else is reported with nothing of it returned.
 */
export function readTurn(session: Session | null, opening: TurnOpening, read: () => Pick<OpenedTurn, "messages" | "summaries" | "state">): TurnRead {
  const nothing = { session: null, messages: [], summaries: [], state: EMPTY_STATE };
  if (!session) return { ...nothing, status: "missing" };
  if (session.userId !== opening.owner.userId) return { ...nothing, status: "foreign" };
  const since = opening.owner.activeSince;
  if (since !== undefined && session.lastActivityAt < since) return { ...nothing, status: "expired" };
  return { status: "ok", session, ...read() };
}

/** Reads with a granted lease; on a failure the lease is given back before the error is thrown. */
export async function withLease(lease: Lease, read: () => TurnRead): Promise<OpenedTurn> {
  try {
    return { lease, ...read() };
  } catch (error) {
    await lease.release().catch(() => {});
    throw error;
  }
}
