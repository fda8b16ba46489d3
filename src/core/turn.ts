import { parseSessionId } from "./ids.js";
import { keepLease } from "./lease-keeper.js";
import type { MemoryCore } from "./memory-core.js";
import type { Lease } from "./types.js";

/** Memory's `runTurn`: `fn` runs holding the session's turn lease, renewed until it settles. */
export async function runTurn<T>(core: MemoryCore, sessionId: string, fn: (lease: Lease) => Promise<T>, options: { waitMs?: number; ttlMs?: number }): Promise<T> {
  const id = parseSessionId(sessionId);
  const lease = await (await core.store).acquireLease(id, {
    waitMs: options.waitMs ?? core.settings.turnWaitMs,
    ttlMs: options.ttlMs ?? core.settings.leaseTtlMs,
  });
  const kept = keepLease(lease, { ttlMs: options.ttlMs ?? core.settings.leaseTtlMs });
  try {
    return await fn(lease);
  } finally {
    await kept.release();
  }
}
