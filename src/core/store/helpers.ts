/**
 * What every store does the same way: the text a search sees, substring hits and their snippets,
 * ranking newest first, and the owner and expiry checks of an owner-scoped call. The built-in stores
 * and {@link completeStore}'s fallbacks share them, so a derived search reads like a native one.
 */
import { SessionNotFoundError, ThreadkeepError } from "../errors.js";
import { contentText } from "../messages.js";
import type { Message, MessageInput, OwnerScope, SearchHit, SearchQuery } from "../types.js";

/** Default number of search hits. */
export const DEFAULT_SEARCH_LIMIT = 20;
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
  for (const bound of ["afterSeq", "beforeSeq"] as const) {
    const value = query[bound];
    if (value !== undefined && (typeof value !== "number" || Number.isNaN(value))) {
      throw new ThreadkeepError("invalid_request", `Search ${bound} must be a number`);
    }
  }
}

/** The messages a search's seq bounds let through (`SearchQuery.afterSeq`, `beforeSeq`); the same array without bounds. */
export function withinSeqBounds(messages: Message[], query: Pick<SearchQuery, "afterSeq" | "beforeSeq">): Message[] {
  const { afterSeq, beforeSeq } = query;
  if (afterSeq === undefined && beforeSeq === undefined) return messages;
  return messages.filter(
    (m) => (afterSeq === undefined || m.seq > afterSeq) && (beforeSeq === undefined || m.seq < beforeSeq),
  );
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
  if (!isOwned(owner, found)) throw new SessionNotFoundError(id);
}

/** Whether `found` (a session's owner and last activity, or nothing) passes `owner`'s check ({@link checkOwner}). */
export function isOwned(
  owner: OwnerScope,
  found: { userId: string; lastActivityAt: number } | null | undefined,
): found is { userId: string; lastActivityAt: number } {
  return !!found && found.userId === owner.userId && !inactiveSince(found, owner.activeSince);
}
