/**
 * The shared vocabulary of threadkeep: messages as OpenAI chat messages plus bookkeeping, sessions,
 * summaries, versioned state, and the {@link SessionStore} contract every backend implements.
 */

/** Roles of an OpenAI chat message (`developer` is the newer name some models use for `system`). */
export type Role = "system" | "developer" | "user" | "assistant" | "tool";

/** The roles threadkeep accepts, in a form usable at run time. */
export const ROLES: readonly Role[] = ["system", "developer", "user", "assistant", "tool"];

/** A tool call made by an assistant message, exactly as in the OpenAI chat API. */
export interface ToolCall {
  id: string;
  type: "function" | (string & {});
  function: { name: string; arguments: string };
  [extra: string]: unknown;
}

/** One part of a multi-part content array (`{ type: "text", text }`, `{ type: "image_url", … }`, …). */
export interface ContentPart {
  type: string;
  text?: string;
  [extra: string]: unknown;
}

/** Message content: a string, an array of parts, or null (an assistant message with only tool calls). */
export type MessageContent = string | ContentPart[] | null;

/**
 * A chat message as the OpenAI chat API knows it. Fields threadkeep does not interpret
 * (`refusal`, `audio`, …) are kept verbatim so a message round-trips losslessly.
 */
export interface ChatMessage {
  role: Role;
  content: MessageContent;
  name?: string;
  tool_calls?: ToolCall[];
  tool_call_id?: string;
  [extra: string]: unknown;
}

/** A message to append: a chat message plus optional threadkeep metadata. */
export interface MessageInput extends ChatMessage {
  /** Free-form application data stored with the message; never sent to a model. */
  metadata?: Record<string, unknown>;
  /** True when the message was cut short (e.g. a client disconnected mid-stream). */
  incomplete?: boolean;
}

/** A stored message. */
export interface Message extends MessageInput {
  /**
   * Position in its session: contiguous, starting at 1, assigned by the store on append. Seqs of
   * messages removed from the tail (pop, truncate, undo) are given again to the next append; the cap
   * removes from the head, so the seqs of capped messages are never reused.
   */
  seq: number;
  /** When the store accepted the message, in milliseconds since the epoch. */
  createdAt: number;
}

/** A conversation thread. */
export interface Session {
  id: string;
  /** The owner. A session of another owner is "not found" for every operation. */
  userId: string;
  /** Milliseconds since the epoch. */
  createdAt: number;
  /** Milliseconds since the epoch; moved on every append and touch. Expiry is measured from here. */
  lastActivityAt: number;
  metadata: Record<string, unknown>;
}

/** What is needed to create a session. */
export interface SessionInput {
  id: string;
  userId: string;
  metadata?: Record<string, unknown>;
  /** Defaults to now. */
  createdAt?: number;
  /** Defaults to `createdAt`. */
  lastActivityAt?: number;
}

/** A summary of the message range `fromSeq..toSeq` (inclusive) of one session. */
export interface Summary {
  /** Assigned by the store, increasing per session. */
  id: number;
  fromSeq: number;
  toSeq: number;
  content: string;
  createdAt: number;
  metadata?: Record<string, unknown>;
}

/** What is needed to save a summary. */
export interface SummaryInput {
  fromSeq: number;
  toSeq: number;
  content: string;
  createdAt?: number;
  metadata?: Record<string, unknown>;
}

/** Small JSON object kept per session, changed only by compare-and-set on `version`. */
export interface SessionState {
  /** 0 for a session whose state was never written. */
  version: number;
  data: Record<string, unknown>;
}

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
   * With `fence`: release that turn lease in the same atomic step once the write applies (it stays
   * held when the write fails), so a turn's commit and its release are one round trip. The holder's
   * `Lease.release()` then has nothing left to do. Stores without `capabilities.combinedTurn` ignore
   * it (the holder's release does the work).
   */
  releaseLease?: boolean;
}

/** How many applied operation ids a session remembers for idempotent writes. */
export const OPERATION_HISTORY = 100;

/** Why a branch split from the line it hangs on. */
export type BranchReason = "regenerate" | "edit" | "fork";

/** The branch reasons, in a form usable at run time. */
export const BRANCH_REASONS: readonly BranchReason[] = ["regenerate", "edit", "fork"];

/**
 * Messages that once followed `atSeq` and were superseded (a regenerate, an edit, a fork): kept, never
 * deleted by the change that superseded them. Switching to a branch swaps it with what follows `atSeq`.
 */
export interface Branch {
  /** Assigned by the store, increasing per session from 1. */
  id: number;
  /** The seq after which the branch split: its first message had seq `atSeq + 1`. */
  atSeq: number;
  /**
   * Null when the branch splits from the main line; otherwise the branch whose messages it splits
   * from (it was superseded together with them, and comes back with them on a switch).
   */
  parentId: number | null;
  reason: BranchReason;
  /** When the branch was made, in milliseconds since the epoch. */
  createdAt: number;
  metadata?: Record<string, unknown>;
  /** The superseded messages, oldest first, with the seqs and times they had. */
  messages: Message[];
}

/** A branch to keep, as {@link ReplaceOptions.branch}. */
export interface BranchInput {
  reason: BranchReason;
  metadata?: Record<string, unknown>;
}

/** A whole branch record to store as it is (imports and migration). */
export type BranchRecord = Omit<Branch, "id"> & { id?: number };

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
}

/** One search result. */
export interface SearchHit {
  sessionId: string;
  seq: number;
  /** A short excerpt around the match. */
  snippet: string;
  message: Message;
}

/** A message's embedding, to store. */
export interface EmbeddingInput {
  seq: number;
  /** The message's `createdAt`: a vector is only ever matched to the message it was made from. */
  createdAt: number;
  vector: ArrayLike<number>;
}

/** A nearest-neighbour search over one owner's message embeddings. */
export interface VectorQuery {
  /** Only this owner's sessions are searched (part of the query, never a filter afterwards). */
  userId: string;
  /** Restrict to one session. */
  sessionId?: string;
  /** The embedding model: only vectors of this model are compared. */
  model: string;
  vector: ArrayLike<number>;
  /** @default 20 */
  limit?: number;
  /** Only messages with `seq < beforeSeq` (recall: older than the window). */
  beforeSeq?: number;
  /** Only messages with `seq > afterSeq` (recall: newer than what a summary covers). */
  afterSeq?: number;
}

/** A vector search hit, best first. */
export interface VectorHit extends SearchHit {
  /** Cosine similarity to the query, -1..1. */
  score: number;
}

/**
 * A store that keeps message embeddings next to the messages (`capabilities.vectors`). A vector
 * belongs to one message (session, seq, createdAt) and one model; it goes when the message goes.
 */
export interface VectorStore extends SessionStore {
  /**
   * Stores embeddings of `model` (replacing earlier ones of those messages); vectors of messages that
   * no longer exist are ignored. @throws `embedding_dimension_mismatch` when a vector's length differs
   * from the vectors already stored for `model`.
   */
  putEmbeddings(sessionId: string, model: string, items: EmbeddingInput[]): Promise<void>;
  /** Seqs of the session's messages without an embedding of `model`, oldest first (at most `limit`). */
  missingEmbeddings(sessionId: string, model: string, limit?: number): Promise<number[]>;
  /** The most similar messages by cosine similarity, best first. @throws `embedding_dimension_mismatch`. */
  searchVectors(query: VectorQuery): Promise<VectorHit[]>;
}

/** True when the store keeps embeddings ({@link VectorStore}). */
export function canStoreVectors(store: SessionStore): store is VectorStore {
  return store.capabilities.vectors === true && typeof (store as Partial<VectorStore>).searchVectors === "function";
}

/** A held turn lease: whole turns of one session run one at a time. */
export interface Lease {
  sessionId: string;
  /** Increases with every grant on a session; pass it to appends so a stale holder cannot commit. */
  fence: number;
  /** When the lease lapses unless renewed or released, in milliseconds since the epoch (moved by `renew`). */
  expiresAt: number;
  /**
   * Extends the lease to `ttlMs` from now while this holder still has it: the heartbeat of a long turn
   * (`Memory.runTurn` beats for you). A lease that lapsed is taken back when nobody was granted it since.
   * @returns false when another holder was granted the session (this fence is stale).
   * @throws `store_unavailable` when the store cannot be reached; the lease may still be held.
   */
  renew(ttlMs: number): Promise<boolean>;
  /** Gives the lease up (idempotent). @throws `store_unavailable`; a failed release may be called again. */
  release(): Promise<void>;
}

/** What {@link SessionStore.openTurn} reads once the turn lease is granted. */
export interface TurnOpening {
  /** The caller: another owner's session is reported as `foreign` and nothing of it is returned. */
  owner: OwnerScope;
  /** How to wait for the lease. */
  lease?: LeaseOptions;
  /** How many of the newest messages to read (0: none). */
  last: number;
}

/** A turn begun by {@link SessionStore.openTurn}: the held lease and the session as it was when granted. */
export interface OpenedTurn {
  /** The session's turn lease, held by the caller (release it, or commit with `releaseLease`). */
  lease: Lease;
  /**
   * `ok`: the owner's active session, read; `missing`: there is none; `foreign`: another owner's;
   * `expired`: the owner's, inactive since before `owner.activeSince`. Only `ok` reads anything.
   */
  status: "ok" | "missing" | "foreign" | "expired";
  /** The session record when `ok`, else null. */
  session: Session | null;
  /** The newest `last` messages, oldest first. */
  messages: Message[];
  /** Every summary, ordered by `fromSeq`. */
  summaries: Summary[];
  state: SessionState;
}

/** Options of {@link SessionStore.acquireLease}. */
export interface LeaseOptions {
  /** How long the lease lasts if not released (a crashed holder blocks no longer). @default 30000 */
  ttlMs?: number;
  /** How long to wait in line before failing with `session_busy`. @default 30000 */
  waitMs?: number;
}

/** What a backend can do beyond the common contract. */
export interface StoreCapabilities {
  /** Data survives close/reopen and process restarts. */
  persistent: boolean;
  /** `search({ mode: "fulltext" })` is supported. */
  fullTextSearch: boolean;
  /** The turn lease holds across processes sharing the store, not only within one process. */
  crossProcessLease: boolean;
  /** The backend expires sessions by itself (e.g. key TTLs); `expire()` still works. */
  nativeExpiry: boolean;
  /** Message embeddings are kept and searched ({@link VectorStore}). */
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
}

/**
 * The store contract. One store serves all sessions; every method is async; results are copies.
 * Writes on a missing session throw `session_not_found`; reads of one (`getMessages`, `countMessages`,
 * `listSummaries`) return empty. Session ids reach a store in canonical (lower-case) form: `Memory`
 * validates them with `parseSessionId`. Ownership is checked by `Memory`, not here: a store is trusted code.
 */
export interface SessionStore {
  /** The backend's name (`memory`, `file`, `sqlite`, `postgres`, `redis`). */
  readonly name: string;
  readonly capabilities: StoreCapabilities;

  /** Creates a session. @throws `session_exists` when the id is taken. */
  createSession(input: SessionInput): Promise<Session>;
  /** The session, or null. */
  getSession(sessionId: string): Promise<Session | null>;
  /** One owner's sessions, most recent activity first. */
  listSessions(userId: string, options?: ListOptions): Promise<SessionPage>;
  /**
   * Every session of every owner, ordered by id ascending (stable while sessions are active), for
   * export and migration. The cursor is opaque.
   */
  listAllSessions(options?: ListOptions): Promise<SessionPage>;
  /** Deletes a session with its messages, summaries and state. @returns false if there was none. */
  deleteSession(sessionId: string): Promise<boolean>;
  /** Sets the last activity to now, or exactly to `at` (imports and tests set past times). */
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
