import { contextReach } from "./context/build.js";
import { SessionNotFoundError } from "./errors.js";
import { parseSessionId } from "./ids.js";
import { keepLease } from "./lease-keeper.js";
import type { MemoryCore } from "./memory/memory-core.js";
import type { PreloadedTurn } from "./context/types.js";
import type { RunTurnOptions } from "./memory/memory-options.js";
import { openTurn } from "./store/complete.js";
import type { Lease } from "./types.js";

/** The key of a held lease in {@link MemoryCore.keepers}. */
export const keeperKey = (sessionId: string, fence: number) => `${sessionId}\n${fence}`;

/**
 * Memory's `runTurn`: `fn` runs holding the session's turn lease, renewed until it settles. With
 * `preload` the turn's context is read with the lease (see {@link openTurn}) and handed to `fn`.
 */
export async function runTurn<T>(
  core: MemoryCore,
  sessionId: string,
  fn: (lease: Lease, preloaded?: PreloadedTurn) => Promise<T>,
  options: RunTurnOptions,
): Promise<T> {
  const id = parseSessionId(sessionId);
  const store = await core.store;
  const ttlMs = options.ttlMs ?? core.settings.leaseTtlMs;
  const waitMs = options.waitMs ?? core.settings.turnWaitMs;
  let lease: Lease;
  let preloaded: PreloadedTurn | undefined;
  if (options.preload) {
    const userId = core.owner(options);
    const last = contextReach(core, undefined);
    const opened = await openTurn(store, id, { owner: core.scope(userId), lease: { ttlMs, waitMs }, last });
    lease = opened.lease;
    preloaded = {
      userId,
      session: opened.session,
      messages: opened.messages,
      last,
      summaries: opened.summaries,
      state: opened.state,
    };
    try {
      if (opened.status === "foreign") throw new SessionNotFoundError(id);
      // As `find` does: an expired session is gone, and this turn starts a new one.
      if (opened.status === "expired") await core.delete(id);
    } catch (error) {
      await lease.release().catch(() => {});
      throw error;
    }
  } else {
    lease = await store.acquireLease(id, { waitMs, ttlMs });
  }
  const kept = keepLease(lease, { ttlMs });
  const key = keeperKey(id, lease.fence);
  core.keepers.set(key, kept);
  try {
    return await fn(lease, preloaded);
  } finally {
    core.keepers.delete(key);
    await kept.release();
  }
}
