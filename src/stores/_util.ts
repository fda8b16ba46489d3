import { SessionNotFoundError, ThreadkeepError } from "../core/errors.js";
import type {
  ListOptions,
  Message,
  MessageInput,
  MessageQuery,
  Session,
  SessionInput,
  SessionPage,
  SummaryInput,
  UserMemory,
} from "../core/types.js";

export {
  DEFAULT_SEARCH_LIMIT,
  checkOwner,
  checkSearchQuery,
  inactiveSince,
  isOwned,
  matchesSubstring,
  messageText,
  rankHits,
  snippetOf,
  substringHits,
  withinSeqBounds,
} from "../core/store/helpers.js";
export { rankByRelevance, rankByRelevanceInSlices } from "../core/store/relevance.js";

/** Default page size of session listings. */
export const DEFAULT_LIST_LIMIT = 50;

/** Encodes a listing cursor: the position after the last session shown. */
export function encodeCursor(session: Pick<Session, "lastActivityAt" | "id">): string {
  return Buffer.from(`${session.lastActivityAt}:${session.id}`).toString("base64url");
}

/** Decodes a listing cursor. @throws `invalid_request` for a cursor threadkeep did not make. */
export function decodeCursor(cursor: string): { lastActivityAt: number; id: string } {
  const text = Buffer.from(cursor, "base64url").toString();
  const colon = text.indexOf(":");
  const lastActivityAt = Number(text.slice(0, colon));
  const id = text.slice(colon + 1);
  if (colon < 1 || !Number.isSafeInteger(lastActivityAt) || id.length === 0) {
    throw new ThreadkeepError("invalid_request", "Invalid cursor");
  }
  return { lastActivityAt, id };
}

/** Orders sessions most recent activity first, ties by id descending (the listing order). */
export function compareSessionsForListing(a: Session, b: Session): number {
  if (a.lastActivityAt !== b.lastActivityAt) return b.lastActivityAt - a.lastActivityAt;
  return a.id < b.id ? 1 : a.id > b.id ? -1 : 0;
}

/** True when `session` comes after the cursor position in listing order. */
export function isAfterCursor(session: Session, cursor: { lastActivityAt: number; id: string }): boolean {
  if (session.lastActivityAt !== cursor.lastActivityAt) return session.lastActivityAt < cursor.lastActivityAt;
  return session.id < cursor.id;
}

/** Applies a {@link MessageQuery} to messages already ordered by seq. */
export function applyMessageQuery(messages: Message[], query: MessageQuery = {}): Message[] {
  let result = messages.filter(
    (m) =>
      (query.afterSeq === undefined || m.seq > query.afterSeq) &&
      (query.beforeSeq === undefined || m.seq < query.beforeSeq) &&
      (query.fromSeq === undefined || m.seq >= query.fromSeq) &&
      (query.toSeq === undefined || m.seq <= query.toSeq),
  );
  if (query.last !== undefined) result = query.last <= 0 ? [] : result.slice(-query.last);
  else if (query.limit !== undefined) result = result.slice(0, Math.max(0, query.limit));
  return result;
}

/** Builds stored messages from inputs, numbering from `firstSeq`. */
export function stampMessages(inputs: MessageInput[], firstSeq: number, createdAt: number): Message[] {
  return inputs.map((input, i) => ({ ...structuredClone(input), seq: firstSeq + i, createdAt }));
}

/** The session record a store keeps, as a fresh copy. */
export function copySession(session: Session): Session {
  return { ...session, metadata: structuredClone(session.metadata) };
}

/**
 * The inclusive seq range a {@link MessageQuery} selects, for stores that read by range
 * (`seq BETWEEN from AND to`); an unbounded side is a safe-integer extreme.
 */
export function seqBounds(query: MessageQuery): [from: number, to: number] {
  let from = Number.MIN_SAFE_INTEGER;
  let to = Number.MAX_SAFE_INTEGER;
  if (query.afterSeq !== undefined) from = Math.max(from, Math.floor(query.afterSeq) + 1);
  if (query.fromSeq !== undefined) from = Math.max(from, Math.ceil(query.fromSeq));
  if (query.beforeSeq !== undefined) to = Math.min(to, Math.ceil(query.beforeSeq) - 1);
  if (query.toSeq !== undefined) to = Math.min(to, Math.floor(query.toSeq));
  return [from, to];
}

/** A new session from its input: times default to now, metadata is copied. */
export function sessionFromInput(input: SessionInput): Session {
  const createdAt = input.createdAt ?? Date.now();
  const lastActivityAt = input.lastActivityAt ?? createdAt;
  return {
    id: input.id,
    userId: input.userId,
    createdAt,
    lastActivityAt,
    metadata: structuredClone(input.metadata ?? {}),
  };
}

/** One owner's page of sessions in listing order (copies), for stores that hold every session in memory. */
export function pageOwnerSessions(sessions: Iterable<Session>, userId: string, options: ListOptions = {}): SessionPage {
  const limit = options.limit ?? DEFAULT_LIST_LIMIT;
  const cursor = options.cursor ? decodeCursor(options.cursor) : null;
  const owned = [...sessions]
    .filter((s) => s.userId === userId && (!cursor || isAfterCursor(s, cursor)))
    .sort(compareSessionsForListing);
  const page = owned.slice(0, limit).map(copySession);
  const last = page.at(-1);
  return { sessions: page, nextCursor: owned.length > limit && last ? encodeCursor(last) : null };
}

/** A page of every session by id ascending (copies; the cursor is the last id shown), for in-memory stores. */
export function pageAllSessions(sessions: Iterable<Session>, options: ListOptions = {}): SessionPage {
  const limit = options.limit ?? DEFAULT_LIST_LIMIT;
  const after = options.cursor ?? "";
  const all = [...sessions].filter((s) => s.id > after).sort((a, b) => (a.id < b.id ? -1 : 1));
  const page = all.slice(0, limit).map(copySession);
  return { sessions: page, nextCursor: all.length > limit ? page[page.length - 1].id : null };
}

/**
 * Imports an optional client package (`() => import("redis")`); a missing one becomes
 * `missing_dependency` naming the package to install, as the store factories promise.
 */
export async function importOptional<T>(importer: () => Promise<T>, pkg: string, store: string): Promise<T> {
  try {
    return await importer();
  } catch (error) {
    const code = (error as { code?: string }).code;
    if (code === "ERR_MODULE_NOT_FOUND" && String((error as Error).message).includes(`'${pkg}'`)) {
      throw new ThreadkeepError(
        "missing_dependency",
        `The ${store} store needs the optional package "${pkg}": run npm install ${pkg}`,
        { cause: error },
      );
    }
    throw error;
  }
}

/**
 * Refuses a summary made from another incarnation of the session (`SummaryInput.sessionCreatedAt`
 * given and not the stored session's `createdAt`): the one it was made from was deleted meanwhile.
 * @throws `session_not_found` then.
 */
export function checkSummarySession(id: string, session: Pick<Session, "createdAt">, input: SummaryInput): void {
  checkIncarnation(id, session, input.sessionCreatedAt);
}

/**
 * Refuses a write meant for another incarnation of the session (`sessionCreatedAt` given and not the
 * stored session's `createdAt`: the one it was meant for was deleted meanwhile).
 * @throws `session_not_found` then.
 */
export function checkIncarnation(
  id: string,
  session: Pick<Session, "createdAt">,
  sessionCreatedAt: number | undefined,
): void {
  if (sessionCreatedAt !== undefined && session.createdAt !== sessionCreatedAt) throw new SessionNotFoundError(id);
}

/** A memory as the SQL stores keep it (SQLite and PostgreSQL: the same columns, JSON as text). */
export interface UserMemoryRow {
  user_id: string;
  id: string;
  text: string;
  created_at: number;
  updated_at: number;
  source: string;
  metadata: string;
  history: string;
}

/** The memory a {@link UserMemoryRow} holds. */
export const memoryFromRow = (row: UserMemoryRow): UserMemory => ({
  id: row.id,
  userId: row.user_id,
  text: row.text,
  createdAt: row.created_at,
  updatedAt: row.updated_at,
  source: JSON.parse(row.source),
  metadata: JSON.parse(row.metadata),
  history: JSON.parse(row.history),
});
