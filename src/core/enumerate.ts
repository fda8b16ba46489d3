/**
 * Enumerating every session of every owner, for export and migration. The contract now declares
 * `SessionStore.listAllSessions`; the guard stays so a store written against the older contract
 * (a third-party backend, a hand-rolled test double) fails with a clear message instead of a
 * `TypeError` deep inside a migration.
 */
import { ThreadkeepError } from "./errors.js";
import type { ListOptions, Session, SessionPage, SessionStore } from "./types.js";

/** A store that can list every session regardless of owner. */
export interface EnumerableStore {
  /** Every session of every owner, ordered by id ascending; the cursor is opaque. */
  listAllSessions(options?: { limit?: number; cursor?: string | null }): Promise<SessionPage>;
}

/** True when `store` implements {@link EnumerableStore.listAllSessions}. */
export function canListAllSessions(store: unknown): store is EnumerableStore {
  return typeof (store as Partial<EnumerableStore> | null)?.listAllSessions === "function";
}

/** Options of {@link iterateAllSessions}. */
export interface IterateOptions extends Pick<ListOptions, "cursor"> {
  /** Sessions fetched per call. @default 500 */
  pageSize?: number;
}

/**
 * Yields every session of the store, page by page (ids ascending).
 * @throws ThreadkeepError `not_supported` when the store cannot list all sessions.
 */
export async function* iterateAllSessions(
  store: Pick<SessionStore, "name"> | SessionStore,
  options: IterateOptions = {},
): AsyncGenerator<Session> {
  if (!canListAllSessions(store)) {
    throw new ThreadkeepError(
      "not_supported",
      `The ${store.name} store cannot list all sessions (it lacks listAllSessions); name a --user or --session instead`,
    );
  }
  let cursor = options.cursor ?? null;
  do {
    const page = await store.listAllSessions({ limit: options.pageSize ?? 500, cursor });
    yield* page.sessions;
    cursor = page.nextCursor;
  } while (cursor);
}
