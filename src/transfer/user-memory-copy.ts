/**
 * Moving memories about users ({@link UserMemory}) between a store and the export format: what export,
 * import and migrate share for them. A memory is copied whole (times, source, metadata and history as
 * they are), into its own user only; its embedding is not carried (see capabilities.ts).
 */
import type { FullStore, UserMemory } from "../core/types.js";
import { sameData } from "./canonical.js";

/** Memories and owners read per call. */
const PAGE = 200;

/** What importing one memory did. */
export type MemoryOutcome = { status: "created" | "unchanged" } | { status: "diverged"; reason: string };

/** The memory as the format holds it: `sessionDeleted` is derived on reads, never stored. */
export function storedMemory(memory: UserMemory): UserMemory {
  const { sessionDeleted: _derived, ...source } = memory.source as UserMemory["source"] & { sessionDeleted?: boolean };
  return { ...memory, source, metadata: memory.metadata ?? {} };
}

/** Every memory of one user, most recently updated first, page by page. */
export async function* userMemories(store: FullStore, userId: string): AsyncGenerator<UserMemory> {
  let cursor: string | null = null;
  do {
    const page = await store.listUserMemories(userId, { limit: PAGE, cursor });
    yield* page.memories.map(storedMemory);
    cursor = page.nextCursor;
  } while (cursor);
}

/**
 * Every user who has memories, ascending. @throws `capability_missing` for a store that keeps memories
 * but cannot list their users: a whole-store copy refuses rather than leaving them behind.
 */
export async function* memoryOwners(store: FullStore): AsyncGenerator<string> {
  let cursor: string | null = null;
  do {
    const page = await store.listMemoryOwners({ limit: PAGE, cursor });
    yield* page.userIds;
    cursor = page.nextCursor;
  } while (cursor);
}

/**
 * Writes a memory into `store`, under its own user: a missing one is created whole; one already there
 * is left alone when identical and reported (`diverged`, nothing written) when not.
 */
export async function importUserMemory(store: FullStore, memory: UserMemory): Promise<MemoryOutcome> {
  const existing = await store.getUserMemory(memory.userId, memory.id);
  if (existing) {
    return sameData(storedMemory(existing), storedMemory(memory))
      ? { status: "unchanged" }
      : { status: "diverged", reason: `memory ${memory.id} of user ${memory.userId} differs in the target` };
  }
  const { id, userId, text, source, metadata, createdAt, updatedAt, history } = storedMemory(memory);
  await store.addUserMemory({ id, userId, text, source, metadata, createdAt, updatedAt, history });
  return { status: "created" };
}
