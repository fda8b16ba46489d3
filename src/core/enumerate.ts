/** Enumerating every session of every owner, for export, migration and pruning. */
import type { ListOptions, Session, FullStore } from "./types.js";

/** Options of {@link iterateAllSessions}. */
export interface IterateOptions extends Pick<ListOptions, "cursor"> {
  /** Sessions fetched per call. @default 500 */
  pageSize?: number;
}

/** Yields every session of the store, page by page through `listAllSessions` (ids ascending). */
export async function* iterateAllSessions(store: FullStore, options: IterateOptions = {}): AsyncGenerator<Session> {
  let cursor = options.cursor ?? null;
  do {
    const page = await store.listAllSessions({ limit: options.pageSize ?? 500, cursor });
    yield* page.sessions;
    cursor = page.nextCursor;
  } while (cursor);
}
