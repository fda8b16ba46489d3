/**
 * Opening a turn: the session's lease plus everything the turn reads (session, window, summaries,
 * state). A store with `capabilities.combinedTurn` does it in one round trip with these helpers; for
 * the others `completeStore` puts the same result together from `acquireLease` and the separate reads.
 */
import type { Lease, OpenedTurn, Session, SessionState, TurnOpening } from "./types.js";

/** What a turn reads besides its lease. */
export type TurnRead = Omit<OpenedTurn, "lease">;

/** The state of a session whose state was never written (or was not read). */
export const EMPTY_STATE: SessionState = { version: 0, data: {} };

/** The turn read of a session that is not read: missing, another owner's or expired. */
export function unread(status: Exclude<OpenedTurn["status"], "ok">): TurnRead {
  return { status, session: null, messages: [], summaries: [], state: EMPTY_STATE };
}

/**
 * The turn read of `session` for `opening`'s owner: only this owner's active session is read
 * (`read`), anything else is reported with nothing of it returned. Stores that open turns
 * themselves use it too, so every store reports missing, foreign and expired alike.
 */
export function readTurn<T extends TurnRead | Promise<TurnRead>>(
  session: Session | null,
  opening: TurnOpening,
  read: (session: Session) => T,
): TurnRead | T {
  if (!session) return unread("missing");
  if (session.userId !== opening.owner.userId) return unread("foreign");
  const since = opening.owner.activeSince;
  if (since !== undefined && session.lastActivityAt < since) return unread("expired");
  return read(session);
}

/** Reads with a granted lease; on a failure the lease is given back before the error is thrown. */
export async function withLease(lease: Lease, read: () => TurnRead | Promise<TurnRead>): Promise<OpenedTurn> {
  try {
    return { lease, ...(await read()) };
  } catch (error) {
    // The caller never saw this lease: it must not stay held until it lapses.
    await lease.release().catch(() => {});
    throw error;
  }
}
