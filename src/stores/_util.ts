import { SessionNotFoundError, ThreadkeepError } from "../core/errors.js";
import { contentText } from "../core/messages.js";
import type {
  ListOptions,
  Message,
  MessageInput,
  MessageQuery,
  OwnerScope,
  SearchHit,
  SearchQuery,
  Session,
  SessionInput,
  SessionPage,
  SummaryInput,
} from "../core/types.js";

/** Default page size of session listings. */
export const DEFAULT_LIST_LIMIT = 50;
/** Default number of search hits. */
export const DEFAULT_SEARCH_LIMIT = 20;

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

/** The searchable text of a message. */
export function messageText(message: MessageInput): string {
  return contentText(message.content);
}

/** Case-insensitive substring test used by stores without native search. */
export function matchesSubstring(message: MessageInput, text: string): boolean {
  return messageText(message).toLowerCase().includes(text.toLowerCase());
}

/** A short excerpt of `text` around the first case-insensitive occurrence of `needle`. */
export function snippetOf(text: string, needle: string, radius = 60): string {
  const at = needle ? text.toLowerCase().indexOf(needle.toLowerCase()) : -1;
  if (at < 0) return text.length > radius * 2 ? `${text.slice(0, radius * 2)}…` : text;
  const start = Math.max(0, at - radius);
  const end = Math.min(text.length, at + needle.length + radius);
  return `${start > 0 ? "…" : ""}${text.slice(start, end)}${end < text.length ? "…" : ""}`;
}

/** Validates a search query's common fields. @throws `invalid_request`. */
export function checkSearchQuery(query: SearchQuery): void {
  if (typeof query.text !== "string" || query.text.trim() === "") {
    throw new ThreadkeepError("invalid_request", "Search text must be a non-empty string");
  }
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
export function pageOwnerSessions(
  sessions: Iterable<Session>,
  userId: string,
  options: ListOptions = {},
): SessionPage {
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

/** The case-insensitive substring hits among one session's messages (copies). */
export function substringHits(sessionId: string, messages: Message[], text: string): SearchHit[] {
  return messages
    .filter((message) => matchesSubstring(message, text))
    .map((message) => ({
      sessionId,
      seq: message.seq,
      snippet: snippetOf(messageText(message), text),
      message: structuredClone(message),
    }));
}

/** Search hits newest first, at most `limit`. */
export function rankHits(hits: SearchHit[], limit = DEFAULT_SEARCH_LIMIT): SearchHit[] {
  return hits.sort((a, b) => b.message.createdAt - a.message.createdAt || b.seq - a.seq).slice(0, limit);
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

/** Whether `session` was last active before `activeSince` (unset: never): expired for the call that passed it. */
export function inactiveSince(session: { lastActivityAt: number }, activeSince: number | undefined): boolean {
  return activeSince !== undefined && session.lastActivityAt < activeSince;
}

/**
 * The owner check of an owner-scoped call, on what the store read in the same step (`found`: the
 * session's owner and last activity, or nothing for a missing session).
 * @throws `session_not_found` for a missing, expired or other owner's session.
 */
export function checkOwner(
  id: string,
  owner: OwnerScope | undefined,
  found: { userId: string; lastActivityAt: number } | null | undefined,
): void {
  if (!owner) return;
  if (!found || found.userId !== owner.userId || inactiveSince(found, owner.activeSince)) {
    throw new SessionNotFoundError(id);
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
export function checkIncarnation(id: string, session: Pick<Session, "createdAt">, sessionCreatedAt: number | undefined): void {
  if (sessionCreatedAt !== undefined && session.createdAt !== sessionCreatedAt) throw new SessionNotFoundError(id);
}
