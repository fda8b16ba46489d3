/**
 * Key names and value decoding of the Redis store, shared by its files (see `redis/index.ts` for the layout).
 */
import { ThreadkeepError } from "../../core/errors.js";
import type { Message, Session, SessionState, Summary } from "../../core/types.js";

/** The key names of one store (`prefix` is its key prefix). */
export function redisKeys(prefix: string) {
  const base = (id: string) => `${prefix}s:{${id}}:`;
  return {
    base,
    /** KEYS of the session data scripts (see `SESSION` in `redis/_scripts.ts`). */
    data(id: string): string[] {
      const b = base(id);
      return [`${b}meta`, `${b}msgs`, `${b}sums`, `${b}state`, `${b}fence`, `${b}ops`, `${b}opsq`, `${b}branches`];
    },
    /** KEYS of the lease scripts (see `LEASE` in `redis/_lease-scripts.ts`). */
    lease(id: string): string[] {
      const b = base(id);
      return [`${b}lease`, `${b}queue`, `${b}alive`, `${b}qseq`, `${b}fence`];
    },
    /** A sharded channel with the session's hash tag: in Cluster it lives on the session's shard. */
    wake: (id: string) => `${base(id)}wake`,
  };
}

/** The key names of one store. */
export type RedisKeys = ReturnType<typeof redisKeys>;

/** Session data that cannot be read. */
export function corrupt(sessionId: string, what: string, cause?: unknown): ThreadkeepError {
  return new ThreadkeepError("store_corrupt", `Unreadable ${what} in redis session ${sessionId}`, {
    cause,
    details: { sessionId },
  });
}

/** Parses stored JSON. @throws `store_corrupt`. */
export function parseJson<T>(sessionId: string, what: string, text: string): T {
  try {
    return JSON.parse(text) as T;
  } catch (error) {
    throw corrupt(sessionId, what, error);
  }
}

/** Stored message items (JSON, each carrying its seq). */
export function parseMessages(sessionId: string, items: string[]): Message[] {
  const out = new Array<Message>(items.length);
  // One try around the loop, not one per item: this runs on every read.
  try {
    for (let i = 0; i < items.length; i++) out[i] = JSON.parse(items[i]) as Message;
  } catch (error) {
    throw corrupt(sessionId, "message", error);
  }
  return out;
}

/** Stored summaries, ordered by `fromSeq` (then id). */
export function parseSummaries(sessionId: string, items: string[]): Summary[] {
  return items
    .map((item) => parseJson<Summary>(sessionId, "summary", item))
    .sort((a, b) => a.fromSeq - b.fromSeq || a.id - b.id);
}

/** The state hash's `v` and `d` fields (absent for a session that never set one). */
export function parseState(
  sessionId: string,
  version: string | null | undefined,
  data: string | null | undefined,
): SessionState {
  return { version: Number(version ?? 0), data: data == null ? {} : parseJson(sessionId, "state", data) };
}

/** A session from its meta fields (userId, createdAt, lastActivityAt, metadata); null when missing. */
export function toSession(id: string, fields: (string | null)[]): Session | null {
  const [userId, createdAt, lastActivityAt, metadata] = fields;
  if (userId == null) return null;
  const session: Session = {
    id,
    userId,
    createdAt: Number(createdAt),
    lastActivityAt: Number(lastActivityAt),
    metadata: parseJson(id, "metadata", metadata ?? "{}"),
  };
  if (!Number.isFinite(session.createdAt) || !Number.isFinite(session.lastActivityAt)) throw corrupt(id, "session");
  return session;
}

/** JSON of a value to store. @throws `code` when it has none. */
export function json(value: unknown, code: "invalid_message" | "invalid_request", what: string): string {
  try {
    return JSON.stringify(value);
  } catch (error) {
    throw new ThreadkeepError(code, `${what} must be JSON-serialisable`, { cause: error });
  }
}

/**
 * Whether a session is past its TTL at `now` (`lastActivityAt < now - ttlMs`, as the memory store
 * decides): gone to every read and write, though Redis keeps its keys for the expiry margin.
 */
export function isExpired(session: Session, ttlMs: number, now: number): boolean {
  return ttlMs > 0 && session.lastActivityAt < now - ttlMs;
}
