import { assembleContext } from "./context/assemble.js";
import type { AssembledContext, ContextPreferences } from "./context/types.js";
import { isThreadkeepError, SessionNotFoundError, ThreadkeepError } from "./errors.js";
import { newSessionId, parseSessionId } from "./ids.js";
import { validateMessages } from "./messages.js";
import { DEFAULTS } from "./policies.js";
import type {
  ChatMessage,
  Lease,
  ListOptions,
  Message,
  MessageInput,
  MessageQuery,
  SearchHit,
  Session,
  SessionPage,
  SessionState,
  SessionStore,
  Summary,
} from "./types.js";

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
  /** How long a turn may hold its session. @default 120000 */
  leaseTtlMs?: number;
  /** How long a turn waits for the turns ahead of it before failing with `session_busy`. @default 60000 */
  turnWaitMs?: number;
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
  /** Apply these instead of the stored preferences. */
  preferences?: ContextPreferences;
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
}

/**
 * The one object that keeps conversations: the library's entry point, and what the server and the
 * CLI wrap. Every method checks ownership: another owner's session is `session_not_found`.
 */
export class Memory {
  readonly settings: MemorySettings;
  #store: Promise<SessionStore>;
  #sweep?: NodeJS.Timeout;

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
    };
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
  async #resolve(sessionId: string, userId: string, create: boolean, metadata?: Record<string, unknown>): Promise<Session> {
    const id = parseSessionId(sessionId);
    const store = await this.#store;
    let session = await store.getSession(id);
    if (session && this.#isExpired(session) && session.userId === userId) {
      await store.deleteSession(id);
      session = null;
    }
    if (!session) {
      if (!create) throw new SessionNotFoundError(id);
      try {
        return await store.createSession({ id, userId, metadata });
      } catch (error) {
        if (!isThreadkeepError(error, "session_exists")) throw error;
        session = await store.getSession(id);
        if (!session) throw error;
      }
    }
    if (session.userId !== userId) throw new SessionNotFoundError(id);
    return session;
  }

  /** Creates a session (a new UUID unless `id` is given) and returns a handle to it. */
  async startSession(options: OwnerOptions & { id?: string; metadata?: Record<string, unknown> } = {}): Promise<SessionHandle> {
    const userId = this.#owner(options);
    const id = options.id ? parseSessionId(options.id) : newSessionId();
    const store = await this.#store;
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
    const session = await this.#resolve(sessionId, this.#owner(options), false);
    return (await this.#store).updateSessionMetadata(session.id, metadata);
  }

  /** Appends messages (creating the session if needed), applying the message cap. */
  async addMessages(sessionId: string, messages: MessageInput[], options: OwnerOptions & { fence?: number } = {}): Promise<Message[]> {
    const valid = validateMessages(messages);
    const session = await this.#resolve(sessionId, this.#owner(options), true);
    return (await this.#store).appendMessages(session.id, valid, {
      maxMessages: this.settings.maxMessages,
      fence: options.fence,
    });
  }

  /** Reads messages, oldest first. */
  async getMessages(sessionId: string, query: MessageQuery & OwnerOptions = {}): Promise<Message[]> {
    const { userId, ...range } = query;
    const session = await this.#resolve(sessionId, this.#owner({ userId }), false);
    return (await this.#store).getMessages(session.id, range);
  }

  /** Searches one owner's messages (one session with `sessionId`), newest first. */
  async search(
    text: string,
    options: OwnerOptions & { sessionId?: string; mode?: "substring" | "fulltext"; limit?: number } = {},
  ): Promise<SearchHit[]> {
    const userId = this.#owner(options);
    const sessionId = options.sessionId ? (await this.#resolve(options.sessionId, userId, false)).id : undefined;
    return (await this.#store).search({ userId, sessionId, text, mode: options.mode, limit: options.limit });
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
    const session = await this.#resolve(sessionId, this.#owner(options), true);
    const store = await this.#store;
    for (let attempt = 0; ; attempt++) {
      const current = await store.getState(session.id);
      if (options.expectedVersion !== undefined && current.version !== options.expectedVersion) {
        return store.setState(session.id, update(current.data), options.expectedVersion);
      }
      try {
        return await store.setState(session.id, update(structuredClone(current.data)), current.version);
      } catch (error) {
        if (!isThreadkeepError(error, "state_conflict") || options.expectedVersion !== undefined || attempt >= 20) throw error;
      }
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
   * `session_busy`.
   */
  async runTurn<T>(sessionId: string, fn: (lease: Lease) => Promise<T>, options: { waitMs?: number; ttlMs?: number } = {}): Promise<T> {
    const id = parseSessionId(sessionId);
    const lease = await (await this.#store).acquireLease(id, {
      waitMs: options.waitMs ?? this.settings.turnWaitMs,
      ttlMs: options.ttlMs ?? this.settings.leaseTtlMs,
    });
    try {
      return await fn(lease);
    } finally {
      await lease.release().catch((error) => console.warn(`[threadkeep] releasing the turn lease failed: ${error}`));
    }
  }

  /**
   * The context the next turn sends: system messages, summaries, state note, the recent window and
   * the new input, within the window and token budget, tool calls kept with their results.
   */
  async buildContext(sessionId: string, options: BuildContextOptions = {}): Promise<AssembledContext> {
    const session = await this.#resolve(sessionId, this.#owner(options), true);
    const store = await this.#store;
    const window = options.window ?? this.settings.window;
    const [history, summaries, state] = await Promise.all([
      store.getMessages(session.id, { last: window }),
      store.listSummaries(session.id),
      store.getState(session.id),
    ]);
    return assembleContext({
      system: options.system ?? [],
      history,
      summaries,
      state,
      input: options.input ?? [],
      window,
      tokenBudget: options.tokenBudget ?? this.settings.tokenBudget,
      model: options.model,
      preferences: options.preferences,
    });
  }

  /** Deletes sessions inactive longer than `ttlMs`. @returns their ids. */
  async expire(now = Date.now()): Promise<string[]> {
    if (this.settings.ttlMs <= 0) return [];
    return (await this.#store).expire(now - this.settings.ttlMs);
  }

  /** Stops the sweep and closes the store. */
  async close(): Promise<void> {
    if (this.#sweep) clearInterval(this.#sweep);
    const store = await this.#store.catch(() => null);
    await store?.close();
  }
}

/** A session of one owner, bound for convenience: every method forwards to {@link Memory}. */
export class SessionHandle {
  readonly #memory: Memory;
  readonly id: string;
  readonly userId: string;

  constructor(memory: Memory, id: string, userId: string) {
    this.#memory = memory;
    this.id = id;
    this.userId = userId;
  }

  #owner(): OwnerOptions {
    return { userId: this.userId };
  }

  /** The session record. */
  info(): Promise<Session> {
    return this.#memory.getSession(this.id, { ...this.#owner(), create: true });
  }
  addMessage(message: MessageInput): Promise<Message> {
    return this.#memory.addMessages(this.id, [message], this.#owner()).then(([stored]) => stored);
  }
  addMessages(messages: MessageInput[]): Promise<Message[]> {
    return this.#memory.addMessages(this.id, messages, this.#owner());
  }
  getMessages(query: MessageQuery = {}): Promise<Message[]> {
    return this.#memory.getMessages(this.id, { ...query, ...this.#owner() });
  }
  search(text: string, options: { mode?: "substring" | "fulltext"; limit?: number } = {}): Promise<SearchHit[]> {
    return this.#memory.search(text, { ...options, ...this.#owner(), sessionId: this.id });
  }
  getState(): Promise<SessionState> {
    return this.#memory.getState(this.id, this.#owner());
  }
  updateState(update: (data: Record<string, unknown>) => Record<string, unknown>): Promise<SessionState> {
    return this.#memory.updateState(this.id, update, this.#owner());
  }
  context(options: Omit<BuildContextOptions, "userId"> = {}): Promise<AssembledContext> {
    return this.#memory.buildContext(this.id, { ...options, ...this.#owner() });
  }
  clear(): Promise<void> {
    return this.#memory.clear(this.id, this.#owner());
  }
  undoTurn(): Promise<Message[]> {
    return this.#memory.undoTurn(this.id, this.#owner());
  }
  async fork(options: { atSeq?: number; id?: string } = {}): Promise<SessionHandle> {
    const fork = await this.#memory.fork(this.id, { ...options, ...this.#owner() });
    return new SessionHandle(this.#memory, fork.id, this.userId);
  }
  delete(): Promise<void> {
    return this.#memory.deleteSession(this.id, this.#owner());
  }
}

/** Creates the {@link Memory} that keeps conversations. */
export function createMemory(options: MemoryOptions): Memory {
  if (!options || (typeof options.store !== "string" && typeof options.store?.appendMessages !== "function")) {
    throw new ThreadkeepError("invalid_request", "createMemory needs a store: a SessionStore or a URL such as sqlite:./data/threadkeep.db");
  }
  return new Memory(options);
}
