import { assembleContext } from "./context/assemble.js";
import { type CompactionOptions, type CompactionResult, Compactor } from "./context/compaction.js";
import { noteCoverage, windowAfterSummary } from "./context/coverage.js";
import { type LoadedContext, loadContext } from "./context/load.js";
import { parseContextPreferences, readPreferences } from "./context/preferences.js";
import type { Summarizer } from "./context/summarize.js";
import { encodingForModel, messageTexts, TokenCounter } from "./context/tokens.js";
import type { AssembledContext, ContextPreferences } from "./context/types.js";
import {
  type ConversationState,
  type EntityRef,
  newPending,
  type PendingConfirmation,
  type PendingInput,
  parseConversationPatch,
  patchConversation,
  readConversation,
  withIntent,
  withReference,
} from "./state/conversation.js";
import { createResolver, type Resolution, type Resolver, type ResolverOptions } from "./state/references.js";
import { historyStart, swapHistoryStart } from "./reconcile.js";
import { SessionHandle } from "./session-handle.js";
import { type StateAccess, changeConversation, clearUsedPreferences, storePreferences, takePending } from "./state/session-state.js";
import { isThreadkeepError, SessionNotFoundError, ThreadkeepError } from "./errors.js";
import { iterateAllSessions } from "./enumerate.js";
import { canStoreVectors } from "./types.js";
import { newSessionId, parseSessionId } from "./ids.js";
import { checkJson } from "./json-limits.js";
import { validateMessages } from "./messages.js";
import { BackgroundEmbedder, type Embedder, type EmbeddingOptions } from "./embeddings.js";
import { DEFAULT_RECALL, type RecallOptions, withRecall } from "./context/recall.js";
import { bestSearchMode, type RankedHit, runSearch, type SearchMode } from "./search.js";
import { DEFAULTS } from "./policies.js";
import { keepLease } from "./lease-keeper.js";
import type {
  Branch,
  BranchInput,
  ChatMessage,
  Lease,
  ListOptions,
  Message,
  MessageInput,
  MessageQuery,
  OwnerScope,
  SearchHit,
  Session,
  SessionPage,
  SessionState,
  SessionStore,
  Summary,
} from "./types.js";

/** Options of {@link Memory.addMessages}. */
export interface AddMessagesOptions extends OwnerOptions {
  /** The fence of the turn lease the caller holds. */
  fence?: number;
  /** The session record, when the caller resolved it already this turn. */
  session?: Session;
  /** Makes the write idempotent: the same id applied again stores nothing more (see `AppendOptions.operationId`). */
  operationId?: string;
}

/** Options of {@link Memory.replaceAfter}. */
export interface ReplaceAfterOptions extends AddMessagesOptions {
  /** Apply only if the session's last seq is this one; otherwise `history_conflict`. */
  expectedLastSeq?: number;
  /** Keep the replaced messages as a branch (`regenerate`, `edit`, `fork`) instead of dropping them. */
  branch?: BranchInput;
}

export { SessionHandle } from "./session-handle.js";

/** Options of {@link createMemory}. */
export interface MemoryOptions {
  /** A store, or a store URL (`memory:`, `file:./data`, `sqlite:./data/threadkeep.db`, `postgres://…`, `redis://…`). */
  store: SessionStore | string;
  /** Recent messages sent back to the model. @default 20 */
  window?: number;
  /** Token budget of history + new input. @default 8000 */
  tokenBudget?: number;
  /** Messages kept per session; older ones are dropped (after being summarized, with a summarizer). @default 200 */
  maxMessages?: number;
  /** Inactivity expiry. @default 7 days; 30 minutes on the in-memory store */
  ttlMs?: number;
  /** Run `expire()` this often in the background (never keeps the process alive). 0 disables. @default 0 */
  sweepIntervalMs?: number;
  /** Owner of sessions when a call names none. @default "default" */
  defaultUserId?: string;
  /**
   * Lifetime of a turn's lease, renewed by a heartbeat while the turn runs: how long a crashed holder
   * (or a release the store missed) can keep its session from the next turn. @default 10000
   */
  leaseTtlMs?: number;
  /** How long a turn waits for the turns ahead of it before failing with `session_busy`. @default 60000 */
  turnWaitMs?: number;
  /**
   * Summarises older messages (e.g. `createSummarizer({ baseUrl, model })`). Without one
   * nothing is summarised and the message cap drops the oldest; with one, it drops only summarised messages.
   */
  summarizer?: Summarizer;
  /** When older messages are summarised (with a summarizer). @default { threshold: 20, maxBatch: 100, background: false } */
  compaction?: CompactionOptions;
  /** Phrase lists of {@link Memory.resolve}. @default English and Dutch built in */
  resolver?: ResolverOptions;
  /** Tell the model the conversational state ("Recently referenced: task 42") in a system note. @default true */
  stateNote?: boolean;
  /**
   * Embeds messages in the background after each append (e.g. `createEmbedder({ baseUrl, model })`),
   * for semantic and hybrid search and recall. Off without one. The store must keep vectors.
   */
  embedder?: Embedder;
  /** Batching and retries of background embedding. @default { batchSize: 64, retryDelayMs: 5000 } */
  embedding?: EmbeddingOptions;
  /** Recall of relevant older messages into the context (with an embedder). @default { enabled: true, limit: 3, minScore: 0.3 } */
  recall?: RecallOptions;
}

/** Whose session an operation concerns. */
export interface OwnerOptions {
  /** @default the memory's `defaultUserId` */
  userId?: string;
}

/** Options of {@link Memory.buildContext}. */
export interface BuildContextOptions extends OwnerOptions {
  /** The new messages of this turn. */
  input?: ChatMessage[];
  /** System messages to put first (the request's, or the application's). */
  system?: ChatMessage[];
  /** Model name, for token counting. */
  model?: string;
  window?: number;
  tokenBudget?: number;
  /** Apply these instead of the stored preferences (which are then left as they are). */
  preferences?: ContextPreferences;
  /** The session record, when the caller resolved it already this turn (saves a store read). */
  session?: Session;
  /** Use the stored history only up to this seq (a turn that replaces what follows it). */
  upToSeq?: number;
  /** Summaries of seqs before this one are of a superseded line. @default the session's (see `core/reconcile.ts`) */
  historyStartsAt?: number;
  /** The time confirmations are checked against. @default Date.now() */
  now?: number;
}

/** The resolved settings of a {@link Memory}. */
export interface MemorySettings {
  window: number;
  tokenBudget: number;
  maxMessages: number;
  ttlMs: number;
  defaultUserId: string;
  leaseTtlMs: number;
  turnWaitMs: number;
  compaction: Required<CompactionOptions>;
  stateNote: boolean;
}

/**
 * The one object that keeps conversations: the library's entry point, and what the server and the
 * CLI wrap. Every method checks ownership: another owner's session is `session_not_found`.
 */
export class Memory {
  readonly settings: MemorySettings;
  #store: Promise<SessionStore>;
  #sweep?: NodeJS.Timeout;
  #compactor: Compactor;
  #resolver: Resolver;
  #vectors?: BackgroundEmbedder;
  #recall: Required<RecallOptions>;

  constructor(options: MemoryOptions) {
    const storeOption = options.store;
    this.#store =
      typeof storeOption === "string"
        ? import("../stores/url.js").then(({ createStore }) => createStore(storeOption, { ttlMs: options.ttlMs }))
        : Promise.resolve(storeOption);
    // A failed open is reported by the first call that needs the store, not as an unhandled rejection.
    this.#store.catch(() => {});
    const inMemory = typeof storeOption === "string" ? storeOption.startsWith("memory:") : storeOption.name === "memory";
    this.settings = {
      window: options.window ?? DEFAULTS.window,
      tokenBudget: options.tokenBudget ?? DEFAULTS.tokenBudget,
      maxMessages: options.maxMessages ?? DEFAULTS.maxMessages,
      ttlMs: options.ttlMs ?? (inMemory ? DEFAULTS.memoryTtlMs : DEFAULTS.ttlMs),
      defaultUserId: options.defaultUserId ?? DEFAULTS.userId,
      leaseTtlMs: options.leaseTtlMs ?? DEFAULTS.leaseTtlMs,
      turnWaitMs: options.turnWaitMs ?? DEFAULTS.turnWaitMs,
      compaction: {
        threshold: options.compaction?.threshold ?? DEFAULTS.window,
        maxBatch: options.compaction?.maxBatch ?? 100,
        background: options.compaction?.background ?? false,
      },
      stateNote: options.stateNote ?? true,
    };
    this.#compactor = new Compactor(options.summarizer, { window: this.settings.window, maxMessages: this.settings.maxMessages, ...this.settings.compaction });
    this.#resolver = createResolver(options.resolver);
    if (options.embedder) this.#vectors = new BackgroundEmbedder(options.embedder, options.embedding);
    this.#recall = { ...DEFAULT_RECALL, ...options.recall };
    if (options.sweepIntervalMs) {
      this.#sweep = setInterval(() => {
        this.expire().catch((error) => console.warn(`[threadkeep] expiry sweep failed: ${error}`));
      }, options.sweepIntervalMs);
      this.#sweep.unref();
    }
  }

  /** The store behind this memory (opened on first use). */
  store(): Promise<SessionStore> {
    return this.#store;
  }

  #owner(options?: OwnerOptions): string {
    return options?.userId ?? this.settings.defaultUserId;
  }

  #isExpired(session: Session): boolean {
    return this.settings.ttlMs > 0 && session.lastActivityAt < Date.now() - this.settings.ttlMs;
  }

  /**
   * The caller's session. A missing (or expired) one is created when `create` is set; another owner's
   * is `session_not_found`, whatever `create` says.
   */
  async #resolve(
    sessionId: string,
    userId: string,
    create: boolean,
    metadata?: Record<string, unknown>,
    known?: Session,
  ): Promise<Session> {
    return (await this.#open(sessionId, userId, create, metadata, known)).session;
  }

  /** {@link #resolve}, also saying whether this call created the session. */
  async #open(
    sessionId: string,
    userId: string,
    create: boolean,
    metadata?: Record<string, unknown>,
    known?: Session,
  ): Promise<{ session: Session; created: boolean }> {
    const id = parseSessionId(sessionId);
    const store = await this.#store;
    let session = await this.#find(id, userId, known);
    if (!session) {
      if (!create) throw new SessionNotFoundError(id);
      if (metadata) checkJson(metadata, "metadata");
      try {
        return { session: await store.createSession({ id, userId, metadata }), created: true };
      } catch (error) {
        if (!isThreadkeepError(error, "session_exists")) throw error;
        session = await store.getSession(id);
        if (!session) throw error;
      }
    }
    if (session.userId !== userId) throw new SessionNotFoundError(id);
    return { session, created: false };
  }

  /**
   * The caller's session (`known` when it is the caller's, saving a read), or null when there is none
   * (an expired one is deleted first). Another owner's session is `session_not_found`.
   */
  async #find(id: string, userId: string, known?: Session): Promise<Session | null> {
    // A turn resolves its session once and hands the record on; it must still be this caller's.
    if (known && known.id === id && known.userId === userId) return known;
    const store = await this.#store;
    const session = await store.getSession(id);
    if (!session) return null;
    if (session.userId !== userId) throw new SessionNotFoundError(id);
    if (!this.#isExpired(session)) return session;
    await store.deleteSession(id);
    return null;
  }

  /** Creates a session (a new UUID unless `id` is given) and returns a handle to it. */
  async startSession(options: OwnerOptions & { id?: string; metadata?: Record<string, unknown> } = {}): Promise<SessionHandle> {
    const userId = this.#owner(options);
    const id = options.id ? parseSessionId(options.id) : newSessionId();
    const store = await this.#store;
    if (options.metadata) checkJson(options.metadata, "metadata");
    if (options.id) await this.#resolve(id, userId, true, options.metadata);
    else await store.createSession({ id, userId, metadata: options.metadata });
    return new SessionHandle(this, id, userId);
  }

  /** A handle to a session by id; it is created on first write if it does not exist. */
  session(sessionId: string, options: OwnerOptions = {}): SessionHandle {
    return new SessionHandle(this, parseSessionId(sessionId), this.#owner(options));
  }

  /** The session, created if missing (`create: true`) or `session_not_found`. */
  async getSession(sessionId: string, options: OwnerOptions & { create?: boolean } = {}): Promise<Session> {
    return this.#resolve(sessionId, this.#owner(options), options.create ?? false);
  }

  /** One owner's sessions, most recent activity first. */
  async listSessions(options: OwnerOptions & ListOptions = {}): Promise<SessionPage> {
    return (await this.#store).listSessions(this.#owner(options), { limit: options.limit, cursor: options.cursor });
  }

  /** Deletes a session with everything in it. */
  async deleteSession(sessionId: string, options: OwnerOptions = {}): Promise<void> {
    const session = await this.#resolve(sessionId, this.#owner(options), false);
    await (await this.#store).deleteSession(session.id);
  }

  /** Replaces a session's metadata. */
  async updateSessionMetadata(sessionId: string, metadata: Record<string, unknown>, options: OwnerOptions = {}): Promise<Session> {
    checkJson(metadata, "metadata");
    const session = await this.#resolve(sessionId, this.#owner(options), false);
    return (await this.#store).updateSessionMetadata(session.id, metadata);
  }

  /**
   * Appends messages (creating the session if needed), applying the message cap. With a summarizer,
   * older messages are summarised first and the cap drops only what a summary covers; a failed
   * summary is logged and loses nothing.
   */
  async addMessages(sessionId: string, messages: MessageInput[], options: AddMessagesOptions = {}): Promise<Message[]> {
    return this.#write(sessionId, undefined, messages, options);
  }

  /**
   * Replaces everything after `seq` with `messages` in one atomic step (all or nothing), creating the
   * session if needed; with `branch`, the replaced messages are kept as a branch. The message cap and
   * summaries apply as in {@link addMessages}. @throws `history_conflict` (see `SessionStore.replaceAfter`).
   */
  async replaceAfter(sessionId: string, seq: number, messages: MessageInput[], options: ReplaceAfterOptions = {}): Promise<Message[]> {
    return this.#write(sessionId, seq, messages, options);
  }

  async #write(sessionId: string, seq: number | undefined, messages: MessageInput[], options: ReplaceAfterOptions): Promise<Message[]> {
    const valid = validateMessages(messages);
    const store = await this.#store;
    const { fence, operationId, expectedLastSeq, branch } = options;
    const summarizing = Boolean(this.#compactor.summarizer);
    const write = { fence, operationId, expectedLastSeq, branch, ...(summarizing ? {} : { maxMessages: this.settings.maxMessages }) };
    const userId = this.#owner(options);
    if (seq === undefined && !options.session && !summarizing && store.capabilities.ownerScope) {
      // The common case, an append to an existing session of this owner, is one store call that
      // checks the owner and expiry itself; anything else (new, expired, another owner's) takes the
      // path below, which creates, deletes or refuses as before.
      const id = parseSessionId(sessionId);
      try {
        const added = await store.appendMessages(id, valid, { ...write, owner: this.#scope(userId) });
        this.#vectors?.schedule(store, id);
        return added;
      } catch (error) {
        if (!isThreadkeepError(error, "session_not_found")) throw error;
      }
    }
    const { session, created } = await this.#open(sessionId, userId, true, undefined, options.session);
    let added: Message[];
    try {
      added = seq === undefined ? await store.appendMessages(session.id, valid, write) : await store.replaceAfter(session.id, seq, valid, write);
    } catch (error) {
      // A refused first write leaves no empty session behind.
      if (created) await store.deleteSession(session.id).catch(() => {});
      throw error;
    }
    // Embedding never holds up (or fails) the write: it runs after, and retries by itself.
    this.#vectors?.schedule(store, session.id);
    if (!summarizing) return added;
    const compaction = this.#compactor.run(store, session.id);
    if (!this.settings.compaction.background) await compaction;
    return added;
  }

  /** Removes and returns the last message (null when there is none): the OpenAI Agents SDK's `popItem`. */
  async pop(sessionId: string, options: OwnerOptions = {}): Promise<Message | null> {
    const session = await this.#resolve(sessionId, this.#owner(options), false);
    return (await this.#store).popMessage(session.id);
  }

  /** The session's branches by id: superseded messages kept by regenerate, edit and fork. */
  async listBranches(sessionId: string, options: OwnerOptions = {}): Promise<Branch[]> {
    const session = await this.#resolve(sessionId, this.#owner(options), false);
    return (await this.#store).listBranches(session.id);
  }

  /** One branch. @throws `not_found`. */
  async getBranch(sessionId: string, branchId: number, options: OwnerOptions = {}): Promise<Branch> {
    const found = (await this.listBranches(sessionId, options)).find((b) => b.id === branchId);
    if (!found) throw new ThreadkeepError("not_found", `No branch ${branchId} in session ${sessionId}`);
    return found;
  }

  /**
   * Makes a branch the main line again (ChatGPT's "< 2/2 >"): its messages follow its `atSeq`, and the
   * branch now holds what they replace, so switching again switches back. @returns the branch after the swap.
   */
  async switchBranch(sessionId: string, branchId: number, options: OwnerOptions & { fence?: number } = {}): Promise<Branch> {
    const session = await this.#resolve(sessionId, this.#owner(options), false);
    const store = await this.#store;
    return swapHistoryStart(store, session, await store.switchBranch(session.id, branchId, { fence: options.fence }));
  }

  /**
   * Continues the main line from `seq`: what followed it is kept as a branch (`reason`, default `fork`)
   * and the next message gets seq `seq + 1`. @returns the new branch, or null when nothing followed `seq`.
   */
  async branchAt(sessionId: string, seq: number, options: OwnerOptions & { reason?: BranchInput["reason"]; metadata?: Record<string, unknown>; fence?: number } = {}): Promise<Branch | null> {
    const session = await this.#resolve(sessionId, this.#owner(options), false);
    const store = await this.#store;
    const before = (await store.listBranches(session.id)).at(-1)?.id ?? 0;
    await store.replaceAfter(session.id, seq, [], { fence: options.fence, branch: { reason: options.reason ?? "fork", metadata: options.metadata } });
    const after = (await store.listBranches(session.id)).at(-1);
    return after && after.id > before ? after : null;
  }

  /** Summarises and caps a session now (what `addMessages` does after appending, with a summarizer). */
  async compact(sessionId: string, options: OwnerOptions = {}): Promise<CompactionResult> {
    const session = await this.#resolve(sessionId, this.#owner(options), false);
    return this.#compactor.run(await this.#store, session.id);
  }

  /** Reads messages, oldest first. */
  async getMessages(sessionId: string, query: MessageQuery & OwnerOptions = {}): Promise<Message[]> {
    const { userId, owner: _owner, ...range } = query;
    const store = await this.#store;
    // One store call where the store checks the owner and expiry in the statement that reads.
    if (store.capabilities.ownerScope) return store.getMessages(parseSessionId(sessionId), { ...range, owner: this.#scope(this.#owner({ userId })) });
    const session = await this.#resolve(sessionId, this.#owner({ userId }), false);
    return store.getMessages(session.id, range);
  }

  /** The owner scope of a store call: this owner, and sessions active within the TTL. */
  #scope(userId: string): OwnerScope {
    return this.settings.ttlMs > 0 ? { userId, activeSince: Date.now() - this.settings.ttlMs } : { userId };
  }

  /**
   * Searches one owner's messages (one session with `sessionId`): `substring` and `fulltext` newest
   * first, `semantic` and `hybrid` (with embeddings) best first. `auto` picks the best mode there is.
   */
  async search(
    text: string,
    options: OwnerOptions & { sessionId?: string; mode?: SearchMode | "auto"; limit?: number } = {},
  ): Promise<RankedHit[]> {
    const userId = this.#owner(options);
    const sessionId = options.sessionId ? (await this.#resolve(options.sessionId, userId, false)).id : undefined;
    const store = await this.#store;
    const mode = options.mode === "auto" ? bestSearchMode(store, this.#vectors !== undefined) : (options.mode ?? "substring");
    return runSearch(store, { userId, sessionId, text, mode, limit: options.limit ?? 20 }, this.#vectors);
  }

  /** Summaries of a session, by seq. */
  async listSummaries(sessionId: string, options: OwnerOptions = {}): Promise<Summary[]> {
    const session = await this.#resolve(sessionId, this.#owner(options), false);
    return (await this.#store).listSummaries(session.id);
  }

  /** The session's state (`{ version: 0, data: {} }` when never written). */
  async getState(sessionId: string, options: OwnerOptions = {}): Promise<SessionState> {
    const session = await this.#resolve(sessionId, this.#owner(options), false);
    return (await this.#store).getState(session.id);
  }

  /**
   * Changes the session's state with `update`, retrying on a concurrent write (compare-and-set).
   * With `expectedVersion`, a single attempt that fails with `state_conflict` when the version moved.
   */
  async updateState(
    sessionId: string,
    update: (data: Record<string, unknown>) => Record<string, unknown>,
    options: OwnerOptions & { expectedVersion?: number } = {},
  ): Promise<SessionState> {
    const { session, created } = await this.#open(sessionId, this.#owner(options), true);
    const store = await this.#store;
    const next = (data: Record<string, unknown>) => {
      const result = update(data);
      checkJson(result, "state.data");
      return result;
    };
    try {
      for (let attempt = 0; ; attempt++) {
        const current = await store.getState(session.id);
        if (options.expectedVersion !== undefined && current.version !== options.expectedVersion) {
          return await store.setState(session.id, next(current.data), options.expectedVersion);
        }
        try {
          return await store.setState(session.id, next(structuredClone(current.data)), current.version);
        } catch (error) {
          if (!isThreadkeepError(error, "state_conflict") || options.expectedVersion !== undefined || attempt >= 20) throw error;
        }
      }
    } catch (error) {
      // A refused first write leaves no empty session behind.
      if (created) await store.deleteSession(session.id).catch(() => {});
      throw error;
    }
  }

  /** Removes every message, summary and the state of a session, keeping its id, owner and metadata. */
  async clear(sessionId: string, options: OwnerOptions = {}): Promise<void> {
    const session = await this.#resolve(sessionId, this.#owner(options), false);
    const store = await this.#store;
    await store.deleteSession(session.id);
    await store.createSession({ id: session.id, userId: session.userId, metadata: session.metadata, createdAt: session.createdAt });
  }

  /** Removes the last turn: the last user message and everything after it. @returns what was removed. */
  async undoTurn(sessionId: string, options: OwnerOptions = {}): Promise<Message[]> {
    const session = await this.#resolve(sessionId, this.#owner(options), false);
    const store = await this.#store;
    const tail = await store.getMessages(session.id, { last: 200 });
    const lastUser = tail.findLastIndex((m) => m.role === "user");
    if (lastUser < 0) return [];
    const removed = tail.slice(lastUser);
    await store.truncateAfter(session.id, removed[0].seq - 1);
    return removed;
  }

  /**
   * Copies a session (up to and including `atSeq`, default all) into a new session of the same owner,
   * with its state and the summaries of what it copies. The copy's seqs start at 1.
   */
  async fork(sessionId: string, options: OwnerOptions & { atSeq?: number; id?: string } = {}): Promise<Session> {
    const source = await this.#resolve(sessionId, this.#owner(options), false);
    const store = await this.#store;
    const id = options.id ? parseSessionId(options.id) : newSessionId();
    const messages = await store.getMessages(source.id, options.atSeq === undefined ? {} : { toSeq: options.atSeq });
    const offset = (messages[0]?.seq ?? 1) - 1;
    const fork = await store.createSession({
      id,
      userId: source.userId,
      metadata: { ...source.metadata, forkedFrom: { sessionId: source.id, atSeq: messages.at(-1)?.seq ?? 0 } },
    });
    for (let i = 0; i < messages.length; i += 100) {
      const batch = messages.slice(i, i + 100).map(({ seq: _s, createdAt: _c, ...input }) => input);
      await store.appendMessages(id, batch);
    }
    const lastCopied = messages.at(-1)?.seq ?? 0;
    for (const summary of await store.listSummaries(source.id)) {
      if (summary.toSeq > lastCopied) continue;
      // Summaries of dropped messages describe what came "before seq 1" of the copy.
      await store.saveSummary(id, {
        fromSeq: Math.max(0, summary.fromSeq - offset),
        toSeq: Math.max(0, summary.toSeq - offset),
        content: summary.content,
        metadata: summary.metadata,
      });
    }
    const state = await store.getState(source.id);
    if (state.version > 0) await store.setState(id, state.data, 0);
    return fork;
  }

  /**
   * Runs `fn` holding the session's turn lease: turns of one session run one after another, in arrival
   * order, across processes where the store allows. Waiting longer than `turnWaitMs` fails with
   * `session_busy`. The lease is short (`leaseTtlMs`) and renewed every third of it while `fn` runs, so
   * a long turn keeps it and a crashed holder lets go within one lifetime; a release the store misses
   * is retried in the background.
   */
  async runTurn<T>(sessionId: string, fn: (lease: Lease) => Promise<T>, options: { waitMs?: number; ttlMs?: number } = {}): Promise<T> {
    const id = parseSessionId(sessionId);
    const lease = await (await this.#store).acquireLease(id, {
      waitMs: options.waitMs ?? this.settings.turnWaitMs,
      ttlMs: options.ttlMs ?? this.settings.leaseTtlMs,
    });
    const kept = keepLease(lease, { ttlMs: options.ttlMs ?? this.settings.leaseTtlMs });
    try {
      return await fn(lease);
    } finally {
      await kept.release();
    }
  }

  /**
   * The context the next turn sends: system messages, summaries, state note, the recent window and
   * the new input, within the window and token budget, tool calls kept with their results. A session
   * that does not exist yet reads as empty (and is not created); another owner's is `session_not_found`.
   */
  async buildContext(sessionId: string, options: BuildContextOptions = {}): Promise<AssembledContext> {
    const userId = this.#owner(options);
    const id = parseSessionId(sessionId);
    // A session that does not exist yet reads as empty: the turn's first append creates it, so a turn
    // that fails before then leaves nothing behind.
    const session = await this.#find(id, userId, options.session);
    const store = await this.#store;
    const window = options.window ?? this.settings.window;
    // With summaries on, the window reaches back to the latest summary while the next one is due.
    // A window asked for explicitly (a preview) is taken as given.
    const reach = this.#compactor.summarizer && options.window === undefined ? this.settings.compaction.threshold + 2 : 0;
    const startSeq = session ? (options.historyStartsAt ?? historyStart(session)) : 1;
    const loaded: LoadedContext = session
      ? await loadContext(store, session.id, window + reach, options.preferences, { fromSeq: startSeq, upToSeq: options.upToSeq })
      : { history: [], summaries: [], state: { version: 0, data: {} }, preferences: options.preferences };
    const tokenBudget = options.tokenBudget ?? this.settings.tokenBudget;
    const input = options.input ?? [];
    // Counted ahead, a few milliseconds at a time: a huge message must not hold the event loop.
    await new TokenCounter(encodingForModel(options.model), { limit: tokenBudget }).prepare(
      messageTexts([...(options.system ?? []), ...loaded.history, ...input]),
    );
    const assemblyWindow = reach ? windowAfterSummary(loaded.history, loaded.summaries, window, reach) : window;
    const recall =
      session && this.#vectors && this.#recall.enabled
        ? await withRecall(this.#vectors, store, { userId, sessionId: session.id, input, loaded, window: assemblyWindow, system: options.system ?? [] }, this.#recall)
        : undefined;
    const context = assembleContext({
      system: recall?.system ?? options.system ?? [],
      history: recall?.history ?? loaded.history,
      summaries: loaded.summaries,
      state: loaded.state,
      input,
      window: assemblyWindow,
      tokenBudget,
      model: options.model,
      preferences: recall?.preferences ?? loaded.preferences,
      now: options.now,
      ...(this.settings.stateNote ? {} : { stateNote: null }),
    });
    noteCoverage(context, loaded.summaries, loaded.history[0]?.seq, startSeq ?? 1);
    if (recall) context.recalled = recall.recalled.filter((r) => context.includedSeqs.includes(r.seq));
    if (session && loaded.stored && !loaded.stored.sticky) {
      // The context is built; failing the turn over this cleanup would be worse than applying them again.
      await clearUsedPreferences({ store, sessionId: session.id }, loaded.stored).catch((error) =>
        console.warn(`[threadkeep] clearing used preferences of session ${session.id} failed: ${error}`),
      );
    }
    return context;
  }

  async #access(sessionId: string, options: OwnerOptions, create = true): Promise<StateAccess> {
    const session = await this.#resolve(sessionId, this.#owner(options), create);
    return { store: await this.#store, sessionId: session.id };
  }

  /** The stored context preferences, if any. */
  async getPreferences(sessionId: string, options: OwnerOptions = {}): Promise<ContextPreferences | undefined> {
    const { store, sessionId: id } = await this.#access(sessionId, options, false);
    return readPreferences((await store.getState(id)).data);
  }

  /**
   * Stores context preferences for the next assembly (then cleared unless `sticky`); `merge` keeps
   * stored fields not given. @returns what is stored. @throws `invalid_request` naming the field.
   */
  async setPreferences(
    sessionId: string,
    preferences: ContextPreferences,
    options: OwnerOptions & { merge?: boolean } = {},
  ): Promise<ContextPreferences | undefined> {
    const valid = parseContextPreferences(preferences);
    return storePreferences(await this.#access(sessionId, options), valid, options.merge ?? false);
  }

  /** Searches the session and focuses the next context on the newest hit (± `around` messages). */
  async recall(
    sessionId: string,
    text: string,
    options: OwnerOptions & { mode?: "substring" | "fulltext"; around?: number; sticky?: boolean } = {},
  ): Promise<SearchHit | null> {
    const [hit] = await this.search(text, { userId: options.userId, sessionId, mode: options.mode, limit: 1 });
    if (!hit) return null;
    const around = options.around ?? 2;
    const focusRange = { fromSeq: Math.max(1, hit.seq - around), toSeq: hit.seq + around };
    await this.setPreferences(sessionId, { focusRange, ...(options.sticky ? { sticky: true } : {}) }, { userId: options.userId, merge: true });
    return hit;
  }

  /** The conversational state: last intent, referenced entities, pending confirmation. */
  async getConversation(sessionId: string, options: OwnerOptions = {}): Promise<ConversationState> {
    const { store, sessionId: id } = await this.#access(sessionId, options, false);
    return readConversation((await store.getState(id)).data);
  }

  /** Changes the conversational state: given fields replace, `null` clears. @throws `invalid_request` naming the field. */
  async patchConversation(sessionId: string, patch: unknown, options: OwnerOptions = {}): Promise<ConversationState> {
    const valid = parseConversationPatch(patch);
    return changeConversation(await this.#access(sessionId, options), (state) => {
      const next = patchConversation(state, valid);
      return [next, next];
    });
  }

  /** Records an entity the conversation just referenced; "that task" resolves to the latest task. */
  async addReference(sessionId: string, entity: Omit<EntityRef, "at">, options: OwnerOptions = {}): Promise<ConversationState> {
    return changeConversation(await this.#access(sessionId, options), (state) => {
      const next = withReference(state, entity);
      return [next, next];
    });
  }

  /** Records the user's last intent, as the application names it. */
  async setIntent(sessionId: string, name: string, options: OwnerOptions = {}): Promise<ConversationState> {
    return changeConversation(await this.#access(sessionId, options), (state) => {
      const next = withIntent(state, name);
      return [next, next];
    });
  }

  /** Asks for a confirmation: the action waits (replacing any earlier one) until confirmed, cancelled or expired. */
  async setPendingConfirmation(sessionId: string, input: PendingInput, options: OwnerOptions = {}): Promise<PendingConfirmation> {
    const pending = newPending(input);
    return changeConversation(await this.#access(sessionId, options), (state) => [{ ...state, pending }, pending]);
  }

  /**
   * Takes the pending confirmation to execute it: returned to exactly one caller, and null when there
   * is none, it expired, or it is not the one with `id`.
   */
  async confirmPending(sessionId: string, options: OwnerOptions & { id?: string; now?: number } = {}): Promise<PendingConfirmation | null> {
    return takePending(await this.#access(sessionId, options), options);
  }

  /** Drops the pending confirmation. @returns it, or null when there was none (or it had expired). */
  async cancelPending(sessionId: string, options: OwnerOptions & { now?: number } = {}): Promise<PendingConfirmation | null> {
    return takePending(await this.#access(sessionId, options), options);
  }

  /**
   * What a user message means for the conversational state, without a model call: a yes or no to
   * the pending confirmation (`expired` when it lapsed), a reference to the latest entity, or none.
   * It changes nothing: call {@link confirmPending} or {@link cancelPending} to act on it.
   */
  async resolve(sessionId: string, text: string, options: OwnerOptions & { now?: number } = {}): Promise<Resolution> {
    // Like buildContext, the first call of a turn: a new session is created, not "not found".
    const { store, sessionId: id } = await this.#access(sessionId, options);
    return this.#resolver.resolve(text, readConversation((await store.getState(id)).data), options.now);
  }

  /** Deletes sessions inactive longer than `ttlMs`. @returns their ids. */
  async expire(now = Date.now()): Promise<string[]> {
    if (this.settings.ttlMs <= 0) return [];
    return (await this.#store).expire(now - this.settings.ttlMs);
  }

  /** Resolves when the background work under way (summaries, embeddings) is done. */
  async idle(): Promise<void> {
    await this.#compactor.idle();
    await this.#vectors?.idle();
  }

  /**
   * Embeds every message of every session that lacks a vector of the embedder's model (after an
   * outage, for messages stored before embeddings were on, or after a model change).
   * @returns sessions visited and messages embedded; `onProgress` hears after each session.
   */
  async reindex(onProgress?: (done: number, embedded: number) => void): Promise<{ sessions: number; embedded: number }> {
    const store = await this.#store;
    if (!this.#vectors) throw new ThreadkeepError("invalid_request", "reindex needs an embedder (--embedding-model)");
    if (!canStoreVectors(store)) throw new ThreadkeepError("not_supported", `The ${store.name} store keeps no embeddings`);
    let sessions = 0;
    let embedded = 0;
    for await (const session of iterateAllSessions(store)) {
      embedded += await this.#vectors.embedSession(store, session.id);
      onProgress?.(++sessions, embedded);
    }
    return { sessions, embedded };
  }

  /** Stops the sweep and closes the store. */
  async close(): Promise<void> {
    if (this.#sweep) clearInterval(this.#sweep);
    await this.idle();
    this.#vectors?.close();
    const store = await this.#store.catch(() => null);
    await store?.close();
  }
}

/** Creates the {@link Memory} that keeps conversations. */
export function createMemory(options: MemoryOptions): Memory {
  if (!options || (typeof options.store !== "string" && typeof options.store?.appendMessages !== "function")) {
    throw new ThreadkeepError("invalid_request", "createMemory needs a store: a SessionStore or a URL such as sqlite:./data/threadkeep.db");
  }
  return new Memory(options);
}
