/**
 * Opening a turn: the session's lease plus everything the turn reads (session, window, summaries,
 * state). A store with `capabilities.combinedTurn` does it in one round trip; for the others the same
 * result is put together here from `acquireLease` and the separate reads.
 */
import type { OpenedTurn, SessionStore, TurnOpening } from "./types.js";

const EMPTY_STATE = { version: 0, data: {} };

/**
 * Waits for the session's turn lease and reads the turn's data (see {@link OpenedTurn}). On any
 * failure after the grant the lease is given back before the error is thrown.
 */
export async function openTurn(store: SessionStore, sessionId: string, opening: TurnOpening): Promise<OpenedTurn> {
  if (store.capabilities.combinedTurn && store.openTurn) return store.openTurn(sessionId, opening);
  const lease = await store.acquireLease(sessionId, opening.lease);
  try {
    const session = await store.getSession(sessionId);
    const nothing = { lease, session: null, messages: [], summaries: [], state: EMPTY_STATE };
    if (!session) return { ...nothing, status: "missing" };
    if (session.userId !== opening.owner.userId) return { ...nothing, status: "foreign" };
    const since = opening.owner.activeSince;
    if (since !== undefined && session.lastActivityAt < since) return { ...nothing, status: "expired" };
    const [messages, summaries, state] = await Promise.all([
      opening.last > 0 ? store.getMessages(sessionId, { last: opening.last }) : Promise.resolve([]),
      store.listSummaries(sessionId),
      store.getState(sessionId),
    ]);
    return { lease, status: "ok", session, messages, summaries, state };
  } catch (error) {
    // The caller never saw this lease: it must not stay held until it lapses.
    await lease.release().catch(() => {});
    throw error;
  }
}
