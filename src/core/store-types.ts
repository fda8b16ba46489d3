/**
 * The {@link SessionStore} contract every backend implements, and its {@link StoreCapabilities}.
 */
import type { Lease, LeaseOptions, OpenedTurn, TurnOpening } from "./lease-types.js";
import type {
  AppendOptions,
  ListOptions,
  MessageQuery,
  MessageRange,
  OwnerScope,
  ReplaceOptions,
  SearchHit,
  SearchQuery,
  SessionPage,
} from "./query-types.js";
import type {
  Branch,
  BranchRecord,
  Message,
  MessageInput,
  Session,
  SessionInput,
  SessionState,
  Summary,
  SummaryInput,
} from "./session-types.js";

/**
 * What a backend says about itself. Only the first three are required; the rest name things a store
 * does natively that {@link completeStore} would otherwise do for it, in more round trips (never
 * anything a caller can tell apart except by its races: a fallback reads before it writes).
 */
export interface StoreCapabilities {
  /** Data survives close/reopen and process restarts. */
  persistent: boolean;
  /** The turn lease holds across processes sharing the store, not only within one process. */
  crossProcessLease: boolean;
  /**
   * The backend removes sessions past the store's TTL by itself (e.g. key TTLs); `expire()` still works.
   * Such a session is gone for every call from the moment it passes the TTL, not from its removal (see
   * {@link SessionStore}).
   */
  nativeExpiry: boolean;
  /** `search({ mode: "fulltext" })` is supported ({@link SearchStore}). @default false */
  fullTextSearch?: boolean;
  /** Message embeddings are kept and searched (`VectorStore`, in `vector-types.ts`). @default false */
  vectors?: boolean;
  /**
   * `getMessages` and `appendMessages` honour `owner` ({@link OwnerScope}) in the same step. Without it
   * the wrapper reads the session first and checks the owner and expiry itself.
   * @default false
   */
  ownerScope?: boolean;
  /**
   * `appendMessages` (and `replaceAfter`) honour {@link AppendOptions.sessionCreatedAt} in the write's
   * own step. Without it the wrapper re-reads the session before the write, which narrows the race
   * (a session deleted and created again under its id meanwhile) to that round trip but cannot close it.
   * @default false
   */
  guardedAppends?: boolean;
  /**
   * `appendMessages` (and `replaceAfter`) honour {@link AppendOptions.operationId}: a retried write
   * applies once. Without it the wrapper drops the id, and a write retried after a failure whose
   * outcome was unknown (a lost connection) may be stored twice.
   * @default false
   */
  idempotentWrites?: boolean;
  /**
   * `openTurn` ({@link TurnStore}) takes the lease and reads the session, its window, summaries and
   * state in one round trip (when nobody waits ahead), and `appendMessages` and `replaceAfter` honour
   * `releaseLease`: a proxied turn costs two round trips. Without it the wrapper opens a turn call by call.
   * @default false
   */
  combinedTurn?: boolean;
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
  /** The backend's name (`memory`, `file`, `sqlite`, `postgres`, `redis`, or your own). */
  readonly name: string;
  readonly capabilities: StoreCapabilities;

  /** Creates a session. @throws `session_exists` when the id is taken (a session past the store's TTL takes none). */
  createSession(input: SessionInput): Promise<Session>;

  /** The session, or null (also when it is past the store's TTL). */
  getSession(sessionId: string): Promise<Session | null>;

  /** One owner's sessions, most recent activity first. */
  listSessions(userId: string, options?: ListOptions): Promise<SessionPage>;

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
   * under concurrent appends. Touches the session. Applies `maxMessages` in the same
   * step (an empty append applies just that), and refuses a stale `fence` (`lease_expired`). The other
   * {@link AppendOptions} are for stores that declare them (`capabilities`) or have summaries
   * (`keepUnsummarized`); {@link completeStore} never passes the others one that does not.
   */
  appendMessages(sessionId: string, messages: MessageInput[], options?: AppendOptions): Promise<Message[]>;

  /** Reads messages, oldest first. A missing session reads as empty. */
  getMessages(sessionId: string, query?: MessageQuery): Promise<Message[]>;

  /** Removes and returns the last message, or null when there is none. */
  popMessage(sessionId: string): Promise<Message | null>;

  /** Removes every message with `seq > seq`. @returns how many were removed. */
  truncateAfter(sessionId: string, seq: number): Promise<number>;

  /** Waits in line (FIFO) for the session's turn lease. @throws `session_busy` when `waitMs` passes. */
  acquireLease(sessionId: string, options?: LeaseOptions): Promise<Lease>;

  /** Releases connections, timers and file handles. Idempotent. */
  close(): Promise<void>;
}

/**
 * Branches (regenerate, edit, fork): a replace that keeps what it replaces. Without it
 * {@link completeStore} replaces by `truncateAfter` + `appendMessages` (two steps, under the turn
 * lease) when no branch is asked for, and refuses with `capability_missing` when one is: it never
 * drops a tail it was asked to keep.
 */
export interface BranchStore {
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
}

/**
 * Summaries of older messages. A store that keeps them also honours, in its writes' own steps,
 * {@link AppendOptions.keepUnsummarized} (the cap never drops a message no summary covers) and
 * {@link SummaryInput.sessionCreatedAt}. Without it sessions have no summaries (`listSummaries` is
 * empty), `saveSummary` fails with `capability_missing`, and a `Memory` with a summarizer refuses
 * the store.
 */
export interface SummaryStore {
  /**
   * Saves a summary. With `summary.sessionCreatedAt`, only into the session of that `createdAt`, decided
   * in the save's own step (see {@link SummaryInput.sessionCreatedAt}).
   * @throws `session_not_found` when there is no session, or (guarded) it is another one than the summary's.
   */
  saveSummary(sessionId: string, summary: SummaryInput): Promise<Summary>;

  /** Summaries ordered by `fromSeq` (empty for a missing session). */
  listSummaries(sessionId: string): Promise<Summary[]>;
}

/** Versioned per-session state. Without it state reads as never written and `setState` fails with `capability_missing`. */
export interface StateStore {
  /** The state; `{ version: 0, data: {} }` when never written. */
  getState(sessionId: string): Promise<SessionState>;

  /** Writes state if the stored version is `expectedVersion`. @throws `state_conflict` otherwise. */
  setState(sessionId: string, data: Record<string, unknown>, expectedVersion: number): Promise<SessionState>;
}

/** Search over one owner's messages. Without it {@link completeStore} searches substrings over reads of the owner's newest sessions. */
export interface SearchStore {
  /** Searches one owner's messages, newest first. */
  search(query: SearchQuery): Promise<SearchHit[]>;
}

/**
 * Every session at once: sweeps and copies (export, migrate). Without it `expire` and
 * `listAllSessions` fail with `capability_missing`: a store with no way to enumerate sessions keeps
 * them until deleted one by one.
 */
export interface RetentionStore {
  /**
   * Every session of every owner, ordered by id ascending (stable while sessions are active), for
   * export and migration. The cursor is opaque.
   */
  listAllSessions(options?: ListOptions): Promise<SessionPage>;

  /** Deletes sessions whose last activity is before `olderThan` (ms since epoch). @returns their ids. */
  expire(olderThan: number): Promise<string[]>;
}

/** Counting without reading. Without it {@link completeStore} counts what `getMessages` returns. */
export interface CountStore {
  /** Number of stored messages (0 for a missing session). */
  countMessages(sessionId: string): Promise<number>;
}

/**
 * Several seq ranges of one owner's sessions read in one call: what ranking and search read around the
 * turns they find (the neighbours of 50 candidates are some 20 ranges). Without it
 * {@link completeStore} reads each range with an owner-scoped `getMessages`, all at once.
 */
export interface RangeReadStore {
  /**
   * Each range's messages, oldest first, one array per range in the order of `ranges` (ranges may
   * overlap, repeat, and name several sessions). Scoped to `owner` as an owner-scoped `getMessages`
   * is (user, `activeSince`, the store's TTL), in the same step, but a range of a session that is
   * missing, another owner's or expired reads as empty rather than throwing `session_not_found`.
   */
  getMessageRanges(ranges: readonly MessageRange[], owner: OwnerScope): Promise<Message[][]>;
}

/**
 * Several sessions read in one call: what recall reads for the hits it quotes (their titles, and
 * that they are still the owner's and live: up to 12 sessions a turn). Without it
 * {@link completeStore} reads each with `getSession`, all at once.
 */
export interface SessionBatchReadStore {
  /**
   * Each session as `getSession` reads it, or null (missing, or past the store's TTL), one per id in
   * the order of `sessionIds` (ids may repeat).
   */
  getSessions(sessionIds: readonly string[]): Promise<(Session | null)[]>;
}

/** A turn opened in one round trip (with `capabilities.combinedTurn`). Without it {@link completeStore} takes the lease and reads call by call. */
export interface TurnStore {
  /**
   * Waits for the turn lease like `acquireLease`, then
   * reads what a turn needs in the same round trip; see {@link OpenedTurn}. Use `openTurn` of
   * `core/open-turn.ts`, which falls back to separate calls for stores without it.
   * @throws `session_busy` as `acquireLease`; on any other failure no lease is left held.
   */
  openTurn(sessionId: string, opening: TurnOpening): Promise<OpenedTurn>;
}

/**
 * A store with every capability (the combined turn aside): what the built-in stores implement, and
 * what `Memory`, the server and the CLI work with — {@link completeStore} makes one of any
 * {@link SessionStore}, and `openTurn()` (core/store/complete.ts) opens a turn on either.
 */
export interface FullStore
  extends
    SessionStore,
    BranchStore,
    SummaryStore,
    StateStore,
    SearchStore,
    RetentionStore,
    CountStore,
    RangeReadStore,
    SessionBatchReadStore,
    UserMemoryStore,
    MemoryOwnersStore {
  openTurn?: TurnStore["openTurn"];
}

const has = (store: SessionStore, ...methods: string[]): boolean =>
  methods.every((m) => typeof (store as unknown as Record<string, unknown>)[m] === "function");

/** True when the store keeps branches ({@link BranchStore}). */
export const hasBranches = (store: SessionStore): store is SessionStore & BranchStore =>
  has(store, "replaceAfter", "listBranches", "switchBranch", "saveBranch");
/** True when the store keeps summaries ({@link SummaryStore}). */
export const hasSummaries = (store: SessionStore): store is SessionStore & SummaryStore =>
  has(store, "saveSummary", "listSummaries");
/** True when the store keeps state ({@link StateStore}). */
export const hasState = (store: SessionStore): store is SessionStore & StateStore => has(store, "getState", "setState");
/** True when the store searches by itself ({@link SearchStore}). */
export const hasSearch = (store: SessionStore): store is SessionStore & SearchStore => has(store, "search");
/** True when the store can enumerate and sweep every session ({@link RetentionStore}). */
export const hasRetention = (store: SessionStore): store is SessionStore & RetentionStore =>
  has(store, "listAllSessions", "expire");
/** True when the store counts messages by itself ({@link CountStore}). */
export const hasCounts = (store: SessionStore): store is SessionStore & CountStore => has(store, "countMessages");
/** True when the store reads several ranges in one call ({@link RangeReadStore}). */
export const hasRangeReads = (store: SessionStore): store is SessionStore & RangeReadStore =>
  has(store, "getMessageRanges");
/** True when the store reads several sessions in one call ({@link SessionBatchReadStore}). */
export const hasSessionBatchReads = (store: SessionStore): store is SessionStore & SessionBatchReadStore =>
  has(store, "getSessions");
/** True when the store opens a turn in one round trip ({@link TurnStore} with `capabilities.combinedTurn`). */
export const hasCombinedTurn = (store: SessionStore): store is SessionStore & TurnStore =>
  store.capabilities.combinedTurn === true && has(store, "openTurn");

/** Where a {@link UserMemory} came from. */
export type UserMemorySource =
  | { kind: "hand" }
  /**
   * Written from a turn: the session and the seqs of the messages it was drawn from. `sessionDeleted`
   * is not stored: reads through `memory.memories` (and the REST API) set it, true when that session
   * is gone (deleted, expired or erased) and the memory outlives it.
   */
  | { kind: "session"; sessionId: string; seqs: number[]; sessionDeleted?: boolean };

/** One earlier version of a {@link UserMemory}: what an update or a contradiction replaced. */
export interface UserMemoryVersion {
  text: string;
  /** When this text stopped being the memory's (ms since epoch). */
  replacedAt: number;
  /** Why it was replaced (`edit`, `contradiction`, …). */
  reason?: string;
}

/**
 * A memory: a short statement about a user ("is vegetarian", "manager is Sam") that outlives the
 * session it was said in. It belongs to one user, with the same tenancy as sessions.
 */
export interface UserMemory {
  id: string;
  userId: string;
  text: string;
  createdAt: number;
  updatedAt: number;
  source: UserMemorySource;
  metadata: Record<string, unknown>;
  /** Earlier texts, oldest first; gone with the memory or the user. */
  history: UserMemoryVersion[];
}

/** What {@link UserMemoryStore.addUserMemory} takes. */
export interface UserMemoryInput {
  /** A UUID; one is made when left out. */
  id?: string;
  userId: string;
  text: string;
  source?: UserMemorySource;
  metadata?: Record<string, unknown>;
  createdAt?: number;
  /** Imports and migration only: the memory's last change. @default createdAt */
  updatedAt?: number;
  /** Imports and migration only: its earlier versions, oldest first. @default [] */
  history?: UserMemoryVersion[];
}

/** What {@link UserMemoryStore.updateUserMemory} changes. */
export interface UserMemoryPatch {
  /** The new text; the old one goes into the history (an unchanged text adds no version). */
  text?: string;
  /** Merged into the stored metadata, key by key. */
  metadata?: Record<string, unknown>;
  /** Why the text changed, kept with the old text (`edit`, `contradiction`, …). */
  reason?: string;
}

/** A page of one user's memories, newest `updatedAt` first. */
export interface UserMemoryPage {
  memories: UserMemory[];
  nextCursor: string | null;
}

/**
 * Memories about users ({@link UserMemory}): a capability of the store contract. Every call is scoped
 * to one user: another user's memory id reads as missing (`null`, `not_found`). Without it
 * {@link completeStore} lists none and refuses writes with `capability_missing`.
 */
export interface UserMemoryStore {
  /** Stores a new memory. */
  addUserMemory(input: UserMemoryInput): Promise<UserMemory>;
  /** The user's memory, or null (also for another user's id). */
  getUserMemory(userId: string, id: string): Promise<UserMemory | null>;
  /** The user's memories, most recently updated first. */
  listUserMemories(userId: string, options?: ListOptions): Promise<UserMemoryPage>;
  /**
   * Replaces the text (and merges `metadata`), keeping the old text in `history` with `reason`.
   * @throws `not_found` for a missing or another user's memory.
   */
  updateUserMemory(userId: string, id: string, patch: UserMemoryPatch): Promise<UserMemory>;
  /** Deletes the memory with its history. @returns false when there was none (or it is another user's). */
  deleteUserMemory(userId: string, id: string): Promise<boolean>;
  /** Deletes every memory of the user with their history. @returns how many. */
  deleteUserMemories(userId: string): Promise<number>;
}

/** True when the store keeps memories about users ({@link UserMemoryStore}). */
export const hasUserMemories = (store: SessionStore): store is SessionStore & UserMemoryStore =>
  has(
    store,
    "addUserMemory",
    "getUserMemory",
    "listUserMemories",
    "updateUserMemory",
    "deleteUserMemory",
    "deleteUserMemories",
  );

/** A page of user ids, ascending. */
export interface UserIdPage {
  userIds: string[];
  nextCursor: string | null;
}

/**
 * Every user who has memories at once: export and migration of a whole store. Without it
 * {@link completeStore} lists none for a store without memories, and refuses with
 * `capability_missing` for one with memories (a copy never leaves them behind silently).
 */
export interface MemoryOwnersStore {
  /**
   * The users who have (or had) memories, ordered by id ascending; the cursor is opaque. A user whose
   * memories are all deleted may still be listed (with none to read).
   */
  listMemoryOwners(options?: ListOptions): Promise<UserIdPage>;
}

/** True when the store can list every user who has memories ({@link MemoryOwnersStore}). */
export const hasMemoryOwners = (store: SessionStore): store is SessionStore & MemoryOwnersStore =>
  has(store, "listMemoryOwners");
