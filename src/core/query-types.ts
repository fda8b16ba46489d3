/**
 * The queries and options of the {@link SessionStore} calls: owner scope, message reads, appends and
 * replaces, session paging and search.
 */
import type { BranchInput, Message, Session } from "./session-types.js";

/**
 * Scopes a store call to one owner (stores whose capabilities say `ownerScope`), checked in the same
 * statement or script as the read or write (one round trip, no `getSession` first): a missing session, another owner's, or one inactive since before
 * `activeSince` is `session_not_found`, and nothing is read or written. The owner-scoped calls are
 * `getMessages` (`query.owner`) and `appendMessages` (`options.owner`).
 */
export interface OwnerScope {
  userId: string;
  /** A session whose last activity is older than this (ms since epoch) counts as expired. Unset: no expiry check. */
  activeSince?: number;
}

/** A seq range of one session: its messages with `fromSeq <= seq <= toSeq` ({@link RangeReadStore}). */
export interface MessageRange {
  sessionId: string;
  fromSeq: number;
  toSeq: number;
}

/** Which messages to read. Results are always oldest first. */
export interface MessageQuery {
  /** Owner-scoped read: see {@link OwnerScope} (without it a missing session reads as empty). */
  owner?: OwnerScope;
  /** Only the last N messages (after the range filters below). */
  last?: number;
  /** Only messages with `seq > afterSeq`. */
  afterSeq?: number;
  /** Only messages with `seq < beforeSeq`. */
  beforeSeq?: number;
  /** Only messages with `seq >= fromSeq`. */
  fromSeq?: number;
  /** Only messages with `seq <= toSeq`. */
  toSeq?: number;
  /** At most this many, counted from the oldest matching (ignored when `last` is set). */
  limit?: number;
}

/** Options of an append. */
export interface AppendOptions {
  /**
   * Keep at most this many messages in the session; the oldest are dropped in the same atomic step.
   * Unset or 0: no cap.
   */
  maxMessages?: number;
  /**
   * Bounds the `maxMessages` cap by the session's summaries: it drops the oldest messages beyond
   * `maxMessages`, but none with a seq past the furthest `toSeq` of the summaries stored when the write
   * applies (none at all without a summary), so only messages a summary covers are ever dropped. The
   * store decides this in the same atomic step as the write, so no caller's view of the session,
   * however stale (another process may have deleted and recreated it), can make it drop more. Only for
   * stores whose capabilities say `keepUnsummarized`: a store without it would drop unsummarised messages.
   * @default false
   */
  keepUnsummarized?: boolean;
  /**
   * With `keepUnsummarized`: the most messages the session keeps whatever its summaries reach. A
   * write that leaves more drops the oldest down to it, summarised or not, in the same atomic step, so
   * a summarizer that keeps failing cannot let a session grow without bound. Ignored without
   * `keepUnsummarized` (then `maxMessages` drops the oldest anyway). Unset or 0: no ceiling.
   * Every store with summaries ({@link SummaryStore}) honours it; {@link completeStore} applies it
   * as a plain cap on a store without them.
   */
  hardCap?: number;
  /** The fence of the turn lease the caller holds; a stale fence makes the append fail with `lease_expired`. */
  fence?: number;
  /**
   * Makes the write idempotent: a write whose operation id this session already applied changes
   * nothing and returns the messages that operation stored (as they are now). The same id with
   * different content fails with `operation_conflict`. The newest {@link OPERATION_HISTORY} ids of a
   * session are remembered. A replay is answered whatever its `fence` (it changes nothing, so a
   * holder that lost its lease after the write applied still learns it applied); with `releaseLease`
   * it gives back the lease of its fence as the write did, if that lease is still held.
   */
  operationId?: string;
  /** Owner-scoped write: see {@link OwnerScope}; the session is not created. */
  owner?: OwnerScope;
  /**
   * The `createdAt` of the session the caller means to write into, as it read it (copies of a session:
   * import, migrate, fork). A store with `capabilities.guardedAppends` applies the write only while the
   * stored session still has this `createdAt`, checked in the write's own atomic step, and otherwise
   * throws `session_not_found` and writes nothing: the session was deleted (and perhaps created again
   * under its id) meanwhile, so the write belongs to a session that is gone. A session created again
   * with the same `createdAt` is not told apart: one made within the same millisecond, or one that
   * another import or migrate of the same source recreated (copies keep the source's `createdAt`).
   * Stores without the capability ignore it.
   */
  sessionCreatedAt?: number;
  /**
   * With `fence`: release that turn lease in the same atomic step once the write applies (it stays
   * held when the write fails), so a turn's commit and its release are one round trip. The holder's
   * `Lease.release()` then has nothing left to do. Stores without `capabilities.combinedTurn` ignore
   * it (the holder's release does the work).
   */
  releaseLease?: boolean;
}

/** How many applied operation ids a session remembers for idempotent writes. */
export const OPERATION_HISTORY = 100;

/** Options of {@link SessionStore.replaceAfter}. */
export interface ReplaceOptions extends AppendOptions {
  /**
   * Apply only if the session's last seq is this one (what the caller read): otherwise fail with
   * `history_conflict` and change nothing.
   */
  expectedLastSeq?: number;
  /**
   * Keep the removed messages as a branch split at `seq` (none is made when nothing is removed).
   * Branches of the main line split after `seq` move with them (their `parentId` becomes the new branch).
   */
  branch?: BranchInput;
}

/** A page of sessions. */
export interface SessionPage {
  sessions: Session[];
  /** Pass back as `cursor` for the next page; null on the last page. */
  nextCursor: string | null;
}

/** Paging of {@link SessionStore.listSessions}. */
export interface ListOptions {
  /** @default 50 */
  limit?: number;
  cursor?: string | null;
}

/** A search over messages. */
export interface SearchQuery {
  /** Only this owner's sessions are searched. */
  userId: string;
  /** Restrict to one session. */
  sessionId?: string;
  text: string;
  /** `substring`: case-insensitive substring; `fulltext`: the backend's full-text search. @default "substring" */
  mode?: "substring" | "fulltext";
  /**
   * `recency`: every word must match, newest first. `relevance` (full text only): any word may match,
   * best match first (bm25 / ts_rank), for ranked and hybrid search. @default "recency"
   */
  ranking?: "recency" | "relevance";
  /** @default 20 */
  limit?: number;
  /**
   * Only messages with `seq > afterSeq` (recall: newer than what a summary covers). Seqs count within
   * a session, so the bounds are meant for a search of one (`sessionId`). Applied before ranking and
   * before `limit`: a bounded search returns the best of the messages within the bounds.
   */
  afterSeq?: number;
  /** Only messages with `seq < beforeSeq` (recall: older than the window); as {@link afterSeq}. */
  beforeSeq?: number;
  /**
   * Leaves out sessions last active before this (ms since epoch), as expired: `Memory` passes now minus
   * its TTL, so a session past it is not found before a sweep deletes it. Unset: no expiry check.
   */
  activeSince?: number;
  /**
   * With `ranking: "relevance"`: a store may also return each hit's neighbouring messages, this many on
   * each side, in the same step ({@link SearchHit.around}), sparing the caller a read of them. A store
   * is free to leave it out: the caller reads what a hit does not carry.
   */
  around?: number;
}

/** One search result. */
export interface SearchHit {
  sessionId: string;
  seq: number;
  /** A short excerpt around the match. */
  snippet: string;
  message: Message;
  /**
   * Only when the query asked for `around` and the store read them with the search: the session's
   * messages from `seq - around` to `seq + around` that exist, the hit's own included, oldest first.
   */
  around?: Message[];
}
