/**
 * Which users this process has lately seen without any memory, so a turn need not read their (empty)
 * memories again: the read would be a third store round trip on every turn of everyone who has none.
 * A write through this process clears the mark at once; one from another process is seen within
 * {@link MEMORYLESS_FOR_MS}.
 */
import type { SessionStore } from "../types.js";

/** How long a user read without memories is taken to have none. */
export const MEMORYLESS_FOR_MS = 30_000;

const marks = new WeakMap<object, Map<string, number>>();

/** True while `userId` was read without memories less than {@link MEMORYLESS_FOR_MS} ago and nothing was written since. */
export function knownMemoryless(store: SessionStore, userId: string, now = Date.now()): boolean {
  const until = marks.get(store)?.get(userId);
  return until !== undefined && until > now;
}

/** Records what a read of the user's memories found. */
export function sawMemories(store: SessionStore, userId: string, count: number, now = Date.now()): void {
  let users = marks.get(store);
  if (!users) marks.set(store, (users = new Map()));
  if (count > 0) users.delete(userId);
  else {
    // Bounded: a process serving many users keeps the newest marks only.
    if (users.size >= 10_000) users.delete(users.keys().next().value as string);
    users.set(userId, now + MEMORYLESS_FOR_MS);
  }
}

/** A memory of `userId` was written: the next turn reads them again. */
export function memoryWritten(store: SessionStore, userId: string): void {
  marks.get(store)?.delete(userId);
}
