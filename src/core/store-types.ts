/**
 * The {@link SessionStore} contract every backend implements, and its {@link StoreCapabilities}.
 */
import type { Lease, LeaseOptions, OpenedTurn, TurnOpening } from "./lease-types.js";
import type { AppendOptions, ListOptions, MessageQuery, ReplaceOptions, SearchHit, SearchQuery, SessionPage } from "./query-types.js";
import type { Branch, BranchRecord, Message, MessageInput, Session, SessionInput, SessionState, Summary, SummaryInput } from "./session-types.js";

/** What a backend can do beyond the common contract. */
export interface StoreCapabilities {
  /** Data survives close/reopen and process restarts. */
  persistent: boolean;
  /** `search({ mode: "fulltext" })` is supported. */
  fullTextSearch: boolean;
  /** The turn lease holds across processes sharing the store, not only within one process. */
  crossProcessLease: boolean;
  /**
   * The backend removes sessions past the store's TTL by itself (e.g. key TTLs); `expire()` still works.
   * Such a session is gone for every call from the moment it passes the TTL, not from its removal (see
   * {@link SessionStore}).
   */
  nativeExpiry: boolean;
  /** Message embeddings are kept and searched (`VectorStore`, in `vector-types.ts`). */
  vectors?: boolean;
  /**
   * `getMessages` and `appendMessages` honour `owner` ({@link OwnerScope}): `Memory` then skips its
   * own `getSession` before them. A store without it is given no `owner` (and checked by `Memory`).
   * @default false
   */
  ownerScope?: boolean;
  /**
   * `openTurn` takes the lease and reads the session, its window, summaries and state in one round
   * trip (when nobody waits ahead), and `appendMessages` and `replaceAfter` honour `releaseLease`: a proxied turn costs two round
   * trips. Stores without it get the same results from `openTurn` in `core/open-turn.ts`, call by call.
   * @default false
   */
  combinedTurn?: boolean;
  /**
   * `appendMessages` and `replaceAfter` honour {@link AppendOptions.keepUnsummarized}: `Memory` with a
   * summarizer then caps a session in the write that passes the cap (and never otherwise than over
   * summarised messages). A store without it is given no such cap, and compaction caps it after reading.
   * @default false
   */
  keepUnsummarized?: boolean;
  /**
   * `saveSummary` honours {@link SummaryInput.sessionCreatedAt}: it refuses (`session_not_found`), in the
   * save's own step, a summary made from a session that was deleted and created again under its id
   * meanwhile. Compaction then passes it. A store without it is given no such field; compaction then
   * re-reads the session just before saving, which narrows the race to that last round trip but
   * cannot close it.
   * @default false
   */
  guardedSummaries?: boolean;
  /**
   * `appendMessages` and `replaceAfter` honour {@link AppendOptions.sessionCreatedAt}: they refuse
   * (`session_not_found`), in the write's own step, a write meant for a session that was deleted and
   * created again under its id meanwhile. The copies of a session (`fork`, import, migrate) then pass
   * it with each batch. A store without it is given no such field; the copies then re-read the session
   * before each batch, which narrows the race to that round trip but cannot close it.
   * @default false
   */
  guardedAppends?: boolean;
}

/**
 * The store contract. One store serves all sessions; every method is async; results are copies.
 * Writes on a missing session throw `session_not_found`; reads of one (`getMessages`, `countMessages`,
 * `listSummaries`) return empty. Session ids reach a store in canonical (lower-case) form: `Memory`
 * validates them with `parseSessionId`. Ownership is checked by `Memory`, not here: a store is trusted code.
 *
 * Expiry. A store with an inactivity TTL of its own (the memory and Redis stores' `ttlMs`) treats a
 * session whose last activity is older than the TTL as gone, for every call: reads and writes,
 * owner-scoped or not, whether or not anything (`expire()`, a sweep, the backend's own key expiry) has
 * removed its data yet. Every call answers as for a session that never existed: `getSession` null, the
 * listings and searches leave it out, reads are empty, writes (`touchSession` included) throw
 * `session_not_found` and never revive it, `openTurn` says `missing`, `deleteSession` false (its data
 * goes all the same), and `createSession` takes its id for a new, empty session. The conformance suite
 * checks this when given `withTtl`. A store without a TTL (file, SQLite, PostgreSQL) keeps a session
 * until `expire()` or a delete; `Memory` applies its own TTL there: owner-scoped calls carry
 * `owner.activeSince` and searches `activeSince` (the same rule, applied by the store in the same step),
 * its listing leaves such sessions out, and its other calls find the session first and delete it when
 * it is past the TTL. Every store honours those `activeSince` bounds, with or without a TTL of its own.
 */
export interface SessionStore {
  /** The backend's name (`memory`, `file`, `sqlite`, `postgres`, `redis`). */
  readonly name: string;
  readonly capabilities: StoreCapabilities;

  /** Creates a session. @throws `session_exists` when the id is taken (a session past the store's TTL takes none). */
  createSession(input: SessionInput): Promise<Session>;
  /** The session, or null (also when it is past the store's TTL). */
  getSession(sessionId: string): Promise<Session | null>;
  /** One owner's sessions, most recent activity first. */
  listSessions(userId: string, options?: ListOptions): Promise<SessionPage>;
  /**
   * Every session of every owner, ordered by id ascending (stable while sessions are active), for
   * export and migration. The cursor is opaque.
   */
  listAllSessions(options?: ListOptions): Promise<SessionPage>;
  /**
   * Deletes a session with its messages, summaries and state. @returns false if there was none (a
   * session past the store's TTL is none; what is left of it is deleted all the same).
   */
  deleteSession(sessionId: string): Promise<boolean>;
  /**
   * Sets the last activity to now, or exactly to `at` (imports and tests set past times).
   * @throws `session_not_found` for a missing session, and for one past the store's TTL (a touch never revives).
   */
  touchSession(sessionId: string, at?: number): Promise<void>;
  /** Replaces the session's metadata. */
  updateSessionMetadata(sessionId: string, metadata: Record<string, unknown>): Promise<Session>;

  /**
   * Appends messages atomically: all or none, with contiguous `seq` after the current last, even
   * under concurrent appends. Touches the session. Applies `maxMessages` (bounded by `keepUnsummarized`)
   * in the same step; an empty append applies just that.
   */
  appendMessages(sessionId: string, messages: MessageInput[], options?: AppendOptions): Promise<Message[]>;
  /** Reads messages, oldest first. A missing session reads as empty. */
  getMessages(sessionId: string, query?: MessageQuery): Promise<Message[]>;
  /** Number of stored messages (0 for a missing session). */
  countMessages(sessionId: string): Promise<number>;
  /** Removes and returns the last message, or null when there is none. */
  popMessage(sessionId: string): Promise<Message | null>;
  /** Removes every message with `seq > seq`. @returns how many were removed. */
  truncateAfter(sessionId: string, seq: number): Promise<number>;
  /**
   * Removes every message with `seq > seq` and appends `messages` after it, in one atomic step: all or
   * nothing, even under concurrent appends (the new messages get seqs from `seq + 1`). Touches the
   * session; applies `maxMessages` (and `keepUnsummarized`), `fence`, `operationId`, `expectedLastSeq` and
   * `branch` in the same step.
   * @throws `history_conflict` when `seq` is not between the seq before the first stored message and
   * the last one, or the last seq is not `expectedLastSeq`.
   */
  replaceAfter(sessionId: string, seq: number, messages: MessageInput[], options?: ReplaceOptions): Promise<Message[]>;

  /** The session's branches by id (empty for a missing session). */
  listBranches(sessionId: string): Promise<Branch[]>;
  /**
   * Swaps a branch of the main line with what follows its `atSeq`, atomically: its messages become the
   * main line's tail again (with their seqs and times), and the branch keeps the tail they replace (its
   * id, reason and creation time stay, so switching again switches back). Branches hanging on either
   * side move with their messages.
   * @throws `not_found` for an unknown branch; `history_conflict` when the branch does not split from
   * the main line or its `atSeq` is no longer on it (removed by undo, the cap or a truncation).
   */
  switchBranch(sessionId: string, branchId: number, options?: { fence?: number }): Promise<Branch>;
  /** Stores a whole branch record (imports, migration); a given `id` is kept. */
  saveBranch(sessionId: string, branch: BranchRecord): Promise<Branch>;

  /**
   * Saves a summary. With `capabilities.guardedSummaries` and `summary.sessionCreatedAt`, only into the
   * session of that `createdAt` (see {@link SummaryInput.sessionCreatedAt}).
   * @throws `session_not_found` when there is no session, or (guarded) it is another one than the summary's.
   */
  saveSummary(sessionId: string, summary: SummaryInput): Promise<Summary>;
  /** Summaries ordered by `fromSeq` (empty for a missing session). */
  listSummaries(sessionId: string): Promise<Summary[]>;

  /** The state; `{ version: 0, data: {} }` when never written. */
  getState(sessionId: string): Promise<SessionState>;
  /** Writes state if the stored version is `expectedVersion`. @throws `state_conflict` otherwise. */
  setState(sessionId: string, data: Record<string, unknown>, expectedVersion: number): Promise<SessionState>;

  /** Searches one owner's messages, newest first. */
  search(query: SearchQuery): Promise<SearchHit[]>;

  /** Deletes sessions whose last activity is before `olderThan` (ms since epoch). @returns their ids. */
  expire(olderThan: number): Promise<string[]>;

  /** Waits in line (FIFO) for the session's turn lease. @throws `session_busy` when `waitMs` passes. */
  acquireLease(sessionId: string, options?: LeaseOptions): Promise<Lease>;
  /**
   * Optional (with `capabilities.combinedTurn`): waits for the turn lease like `acquireLease`, then
   * reads what a turn needs in the same round trip; see {@link OpenedTurn}. Use `openTurn` of
   * `core/open-turn.ts`, which falls back to separate calls for stores without it.
   * @throws `session_busy` as `acquireLease`; on any other failure no lease is left held.
   */
  openTurn?(sessionId: string, opening: TurnOpening): Promise<OpenedTurn>;

  /** Releases connections, timers and file handles. Idempotent. */
  close(): Promise<void>;
}
