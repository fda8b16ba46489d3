/**
 * What the framework adapters share: a `Memory` from a Memory or a store URL, a threadkeep session id
 * for a framework's own id (AI SDK chat ids and LangChain session ids are any string), and reads of a
 * session that does not exist yet as empty.
 */
import { createHash } from "node:crypto";
import { isThreadkeepError, ThreadkeepError } from "../core/errors.js";
import { isValidSessionId } from "../core/ids.js";
import { Memory } from "../core/memory/memory.js";
import { createMemory } from "../create-memory.js";

/** A `Memory`, or a store URL (`sqlite:./data/threadkeep.db`, `postgres://…`) opened for you. */
export type MemoryOrUrl = Memory | string;

const opened = new Map<string, Memory>();

/**
 * The memory to use. A URL opens one `Memory` per URL for the whole process (adapters are created per
 * request or per session, and must not open a connection pool each time); close it with {@link closeOpenedMemories}.
 */
export function resolveMemory(memory: MemoryOrUrl): Memory {
  if (memory instanceof Memory) return memory;
  if (typeof memory !== "string")
    throw new ThreadkeepError("invalid_request", "memory must be a threadkeep Memory or a store URL");
  let found = opened.get(memory);
  if (!found) {
    found = createMemory({ store: memory });
    opened.set(memory, found);
  }
  return found;
}

/** Closes the memories the adapters opened from URLs. */
export async function closeOpenedMemories(): Promise<void> {
  const all = [...opened.values()];
  opened.clear();
  await Promise.all(all.map((m) => m.close()));
}

/**
 * The threadkeep session id of a framework's id: a valid session id is used as it is; any other string
 * maps to a UUID derived from the owner and the id, so the same id of two users are two sessions.
 */
export function sessionIdFor(externalId: string, userId: string): string {
  if (typeof externalId !== "string" || externalId.length === 0)
    throw new ThreadkeepError("invalid_session_id", "A session id must be a non-empty string");
  if (isValidSessionId(externalId)) return externalId.toLowerCase();
  const hex = createHash("sha256").update(`threadkeep\u0000${userId}\u0000${externalId}`).digest("hex");
  // Shaped as a version 8 (custom) RFC 9562 UUID, which threadkeep accepts like any canonical UUID.
  const variant = ((Number.parseInt(hex[16], 16) & 0x3) | 0x8).toString(16);
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-8${hex.slice(13, 16)}-${variant}${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
}

/** `read()`, or `empty` when the session does not exist (yet): frameworks read before the first write. */
export async function orEmpty<T>(read: () => Promise<T>, empty: T): Promise<T> {
  try {
    return await read();
  } catch (error) {
    if (isThreadkeepError(error, "session_not_found")) return empty;
    throw error;
  }
}
