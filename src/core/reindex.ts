import { iterateAllSessions } from "./enumerate.js";
import { ThreadkeepError } from "./errors.js";
import type { MemoryCore } from "./memory/memory-core.js";
import { canStoreVectors } from "./types.js";

/** Memory's `reindex`: embeds what lacks a vector of the embedder's model, session by session. */
export async function reindex(
  core: MemoryCore,
  onProgress?: (done: number, embedded: number) => void,
): Promise<{ sessions: number; embedded: number }> {
  const store = await core.store;
  if (!core.vectors) throw new ThreadkeepError("invalid_request", "reindex needs an embedder (--embedding-model)");
  if (!canStoreVectors(store))
    throw new ThreadkeepError("not_supported", `The ${store.name} store keeps no embeddings`);
  let sessions = 0;
  let embedded = 0;
  for await (const session of iterateAllSessions(store)) {
    embedded += await core.vectors.embedSession(store, session.id);
    onProgress?.(++sessions, embedded);
  }
  return { sessions, embedded };
}
