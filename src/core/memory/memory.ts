import type { CompactionResult } from "../context/compaction.js";
import { buildContext } from "../context/build.js";
import type { AssembledContext, ContextPreferences, PreloadedTurn } from "../context/types.js";
import type { ConversationState, EntityRef, PendingConfirmation, PendingInput } from "../state/conversation.js";
import type { Resolution } from "../state/references.js";
import { branchAt, clear, fork, getBranch, listBranches, pop, switchBranch, undoTurn } from "../history/branches.js";
import { writeMessages } from "../history/write.js";
import { MemoryCore } from "./memory-core.js";
import type {
  AddMessagesOptions,
  BuildContextOptions,
  MemoryInit,
  MemorySettings,
  OwnerOptions,
  ReplaceAfterOptions,
  RunTurnOptions,
} from "./memory-options.js";
import { reindex } from "../reindex.js";
import { StateApi } from "./state-api.js";
import { UserMemories } from "../user-memories/api.js";
import { runTurn } from "../turn.js";
import { newSessionId, parseSessionId } from "../ids.js";
import { checkJson } from "../json-limits.js";
import { ThreadkeepError } from "../errors.js";
import { bestSearchMode, type RankedHit, runSearch, type SearchMode, type SearchRanking } from "../search.js";
import type {
  Branch,
  BranchInput,
  Lease,
  ListOptions,
  Message,
  MessageInput,
  MessageQuery,
  SearchHit,
  Session,
  SessionPage,
  SessionState,
  FullStore,
  Summary,
} from "../types.js";

export type { PreloadedTurn } from "../context/types.js";
export type {
  AddMessagesOptions,
  BuildContextOptions,
  MemoryInit,
  MemoryOptions,
  MemorySettings,
  OwnerOptions,
  ReplaceAfterOptions,
  RunTurnOptions,
} from "./memory-options.js";

/**
 * The one object that keeps conversations: the library's entry point, and what the server and the
 * CLI wrap. Every method checks ownership: another owner's session is `session_not_found`.
 */
export class Memory {
  readonly settings: MemorySettings;
  /** The memories about users: `memory.memories.add({ text }, { userId })`, `list`, `get`, `update`, `delete`. */
  readonly memories: UserMemories;
  readonly #core: MemoryCore;
  readonly #state: StateApi;
  #sweep?: NodeJS.Timeout;

  constructor(options: MemoryInit) {
    this.#core = new MemoryCore(options);
    this.#state = new StateApi(this.#core, (text, searchOptions) => this.search(text, searchOptions));
    this.settings = this.#core.settings;
    const vectors = this.#core.vectors;
    this.memories = new UserMemories({
      store: this.#core.store,
      owner: (options) => this.#core.owner(options),
      sessionLive: (id, userId) => this.#core.isLive(id, userId),
      semantics: vectors ? { vectors, minScore: this.#core.recall.minScore } : undefined,
    });
    if (options.sweepIntervalMs) {
      this.#sweep = setInterval(() => {
        this.expire().catch((error) => console.warn(`[threadkeep] expiry sweep failed: ${error}`));
      }, options.sweepIntervalMs);
      this.#sweep.unref();
    }
  }

  /** The store behind this memory (opened on first use). */
  store(): Promise<FullStore> {
    return this.#core.store;
  }

  /** Creates a session (a new UUID unless `id` is given) and returns a handle to it. */
  async startSession(
    options: OwnerOptions & { id?: string; metadata?: Record<string, unknown> } = {},
  ): Promise<SessionHandle> {
    const userId = this.#core.owner(options);
    const id = options.id ? parseSessionId(options.id) : newSessionId();
    const store = await this.#core.store;
    if (options.metadata) checkJson(options.metadata, "metadata");
    if (options.id) await this.#core.resolve(id, userId, true, options.metadata);
    else await store.createSession({ id, userId, metadata: options.metadata });
    return new SessionHandle(this, id, userId);
  }

  /** A handle to a session by id; it is created on first write if it does not exist. */
  session(sessionId: string, options: OwnerOptions = {}): SessionHandle {
    return new SessionHandle(this, parseSessionId(sessionId), this.#core.owner(options));
  }

  /** The session, created if missing (`create: true`) or `session_not_found`. */
  async getSession(sessionId: string, options: OwnerOptions & { create?: boolean } = {}): Promise<Session> {
    return this.#core.resolve(sessionId, this.#core.owner(options), options.create ?? false);
  }

  /** One owner's sessions, most recent activity first; none past the TTL, swept or not. */
  async listSessions(options: OwnerOptions & ListOptions = {}): Promise<SessionPage> {
    const page = await (
      await this.#core.store
    ).listSessions(this.#core.owner(options), { limit: options.limit, cursor: options.cursor });
    const { activeSince } = this.#core.scope(this.#core.owner(options));
    const live =
      activeSince === undefined ? page.sessions : page.sessions.filter((s) => s.lastActivityAt >= activeSince);
    // Most recent first: past the first expired session every one is, on this page and the next.
    return live.length === page.sessions.length ? page : { sessions: live, nextCursor: null };
  }

  /** Deletes a session with everything in it. */
  async deleteSession(sessionId: string, options: OwnerOptions = {}): Promise<void> {
    const session = await this.#core.resolve(sessionId, this.#core.owner(options), false);
    await this.#core.delete(session.id);
  }

  /** Replaces a session's metadata. */
  async updateSessionMetadata(
    sessionId: string,
    metadata: Record<string, unknown>,
    options: OwnerOptions = {},
  ): Promise<Session> {
    checkJson(metadata, "metadata");
    const session = await this.#core.resolve(sessionId, this.#core.owner(options), false);
    return (await this.#core.store).updateSessionMetadata(session.id, metadata);
  }

  /**
   * Appends messages (creating the session if needed), applying the message cap. With a summarizer,
   * older messages are summarised first and the cap drops only what a summary covers; a failed
   * summary is logged and loses nothing.
   */
  addMessages(sessionId: string, messages: MessageInput[], options: AddMessagesOptions = {}): Promise<Message[]> {
    // Not async: writeMessages is, and a second promise around it costs every append microtask turns.
    return writeMessages(this.#core, sessionId, undefined, messages, options);
  }

  /**
   * Replaces everything after `seq` with `messages` in one atomic step (all or nothing), creating the
   * session if needed; with `branch`, the replaced messages are kept as a branch. The message cap and
   * summaries apply as in {@link addMessages}. @throws `history_conflict` (see `FullStore.replaceAfter`).
   */
  async replaceAfter(
    sessionId: string,
    seq: number,
    messages: MessageInput[],
    options: ReplaceAfterOptions = {},
  ): Promise<Message[]> {
    return writeMessages(this.#core, sessionId, seq, messages, options);
  }

  /** Removes and returns the last message (null when there is none): the OpenAI Agents SDK's `popItem`. */
  async pop(sessionId: string, options: OwnerOptions = {}): Promise<Message | null> {
    return pop(this.#core, sessionId, options);
  }

  /** The session's branches by id: superseded messages kept by regenerate, edit and fork. */
  async listBranches(sessionId: string, options: OwnerOptions = {}): Promise<Branch[]> {
    return listBranches(this.#core, sessionId, options);
  }

  /** One branch. @throws `not_found`. */
  async getBranch(sessionId: string, branchId: number, options: OwnerOptions = {}): Promise<Branch> {
    return getBranch(this.#core, sessionId, branchId, options);
  }

  /**
   * Makes a branch the main line again (ChatGPT's "< 2/2 >"): its messages follow its `atSeq`, and the
   * branch now holds what they replace, so switching again switches back. @returns the branch after the swap.
   */
  async switchBranch(
    sessionId: string,
    branchId: number,
    options: OwnerOptions & { fence?: number } = {},
  ): Promise<Branch> {
    return switchBranch(this.#core, sessionId, branchId, options);
  }

  /**
   * Continues the main line from `seq`: what followed it is kept as a branch (`reason`, default `fork`)
   * and the next message gets seq `seq + 1`. @returns the new branch, or null when nothing followed `seq`.
   */
  async branchAt(
    sessionId: string,
    seq: number,
    options: OwnerOptions & { reason?: BranchInput["reason"]; metadata?: Record<string, unknown>; fence?: number } = {},
  ): Promise<Branch | null> {
    return branchAt(this.#core, sessionId, seq, options);
  }

  /** Summarises and caps a session now (what `addMessages` does after appending, with a summarizer). */
  async compact(sessionId: string, options: OwnerOptions = {}): Promise<CompactionResult> {
    const session = await this.#core.resolve(sessionId, this.#core.owner(options), false);
    return this.#core.compactor.run(await this.#core.store, session.id);
  }

  /** Reads messages, oldest first. */
  getMessages(sessionId: string, query: MessageQuery & OwnerOptions = {}): Promise<Message[]> {
    const store = this.#core.opened;
    // The hot path, not async: one store call (the store checks the owner and expiry where it reads),
    // without a promise of its own around the store's.
    if (store) {
      const { userId, owner: _owner, ...range } = query;
      try {
        return store.getMessages(parseSessionId(sessionId), {
          ...range,
          owner: this.#core.scope(this.#core.owner({ userId })),
        });
      } catch (error) {
        return Promise.reject(error);
      }
    }
    return this.#getMessages(sessionId, query);
  }

  async #getMessages(sessionId: string, query: MessageQuery & OwnerOptions): Promise<Message[]> {
    const { userId, owner: _owner, ...range } = query;
    const store = await this.#core.store;
    return store.getMessages(parseSessionId(sessionId), {
      ...range,
      owner: this.#core.scope(this.#core.owner({ userId })),
    });
  }

  /**
   * Searches one owner's messages (one session with `sessionId`). `substring` and `fulltext` rank
   * newest first, or with `ranking: "relevance"` by BM25 over any of the words; `semantic` and
   * `hybrid` (with embeddings; `hybrid` without is the BM25 ranking) best first. `auto` picks the best
   * there is: hybrid with embeddings, else the BM25 ranking (`ranking: "recency"`: full text or
   * substring, newest first). `neighbours` adds to each hit the turns after it (the reply to a question).
   */
  async search(
    text: string,
    options: OwnerOptions & {
      sessionId?: string;
      mode?: SearchMode | "auto";
      ranking?: SearchRanking;
      limit?: number;
      neighbours?: number;
      neighboursBefore?: number;
    } = {},
  ): Promise<RankedHit[]> {
    const userId = this.#core.owner(options);
    const sessionId = options.sessionId ? (await this.#core.resolve(options.sessionId, userId, false)).id : undefined;
    const store = await this.#core.store;
    let { mode = "substring", ranking } = options;
    if (mode === "auto") {
      const semantic = this.#core.vectors !== undefined && ranking !== "recency";
      mode = bestSearchMode(store, semantic);
      if (!semantic) ranking ??= "relevance";
    }
    // A session past the TTL is not searched, swept or not (the store leaves it out in the same query).
    const { activeSince } = this.#core.scope(userId);
    const { neighbours, neighboursBefore } = options;
    return runSearch(
      store,
      { userId, sessionId, text, mode, ranking, limit: options.limit ?? 20, activeSince, neighbours, neighboursBefore },
      this.#core.vectors,
    );
  }

  /** Summaries of a session, by seq. */
  async listSummaries(sessionId: string, options: OwnerOptions = {}): Promise<Summary[]> {
    const session = await this.#core.resolve(sessionId, this.#core.owner(options), false);
    return (await this.#core.store).listSummaries(session.id);
  }

  /** The session's state (`{ version: 0, data: {} }` when never written). */
  async getState(sessionId: string, options: OwnerOptions = {}): Promise<SessionState> {
    return this.#state.getState(sessionId, options);
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
    return this.#state.updateState(sessionId, update, options);
  }

  /** Removes every message, summary and the state of a session, keeping its id, owner and metadata. */
  async clear(sessionId: string, options: OwnerOptions = {}): Promise<void> {
    return clear(this.#core, sessionId, options);
  }

  /** Removes the last turn: the last user message and everything after it. @returns what was removed. */
  async undoTurn(sessionId: string, options: OwnerOptions = {}): Promise<Message[]> {
    return undoTurn(this.#core, sessionId, options);
  }

  /**
   * Copies a session (up to and including `atSeq`, default all) into a new session of the same owner,
   * with its state and the summaries of what it copies. The copy's seqs start at 1.
   */
  async fork(sessionId: string, options: OwnerOptions & { atSeq?: number; id?: string } = {}): Promise<Session> {
    return fork(this.#core, sessionId, options);
  }

  /**
   * Runs `fn` holding the session's turn lease: turns of one session run one after another, in arrival
   * order, across processes where the store allows. Waiting longer than `turnWaitMs` fails with
   * `session_busy`. The lease is short (`leaseTtlMs`) and renewed every third of it while `fn` runs, so
   * a long turn keeps it and a crashed holder lets go within one lifetime; a release the store misses
   * is retried in the background. With `preload`, the turn's context is read together with the lease
   * (one round trip on stores with `capabilities.combinedTurn`) and handed to `fn` for
   * `buildContext({ preloaded })`; the turn's last write may pass `releaseLease` to give the lease
   * back in the same round trip.
   */
  async runTurn<T>(
    sessionId: string,
    fn: (lease: Lease, preloaded?: PreloadedTurn) => Promise<T>,
    options: RunTurnOptions = {},
  ): Promise<T> {
    return runTurn(this.#core, sessionId, fn, options);
  }

  /**
   * The context the next turn sends: system messages, summaries, state note, the recent window and
   * the new input, within the window and token budget, tool calls kept with their results. A session
   * that does not exist yet reads as empty (and is not created); another owner's is `session_not_found`.
   */
  async buildContext(sessionId: string, options: BuildContextOptions = {}): Promise<AssembledContext> {
    return buildContext(this.#core, sessionId, options);
  }

  /** The stored context preferences, if any. */
  async getPreferences(sessionId: string, options: OwnerOptions = {}): Promise<ContextPreferences | undefined> {
    return this.#state.getPreferences(sessionId, options);
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
    return this.#state.setPreferences(sessionId, preferences, options);
  }

  /** Searches the session and focuses the next context on the newest hit (± `around` messages). */
  async recall(
    sessionId: string,
    text: string,
    options: OwnerOptions & { mode?: "substring" | "fulltext"; around?: number; sticky?: boolean } = {},
  ): Promise<SearchHit | null> {
    return this.#state.recall(sessionId, text, options);
  }

  /** The conversational state: last intent, referenced entities, pending confirmation. */
  async getConversation(sessionId: string, options: OwnerOptions = {}): Promise<ConversationState> {
    return this.#state.getConversation(sessionId, options);
  }

  /** Changes the conversational state: given fields replace, `null` clears. @throws `invalid_request` naming the field. */
  async patchConversation(sessionId: string, patch: unknown, options: OwnerOptions = {}): Promise<ConversationState> {
    return this.#state.patchConversation(sessionId, patch, options);
  }

  /** Records an entity the conversation just referenced; "that task" resolves to the latest task. */
  async addReference(
    sessionId: string,
    entity: Omit<EntityRef, "at">,
    options: OwnerOptions = {},
  ): Promise<ConversationState> {
    return this.#state.addReference(sessionId, entity, options);
  }

  /** Records the user's last intent, as the application names it. */
  async setIntent(sessionId: string, name: string, options: OwnerOptions = {}): Promise<ConversationState> {
    return this.#state.setIntent(sessionId, name, options);
  }

  /** Asks for a confirmation: the action waits (replacing any earlier one) until confirmed, cancelled or expired. */
  async setPendingConfirmation(
    sessionId: string,
    input: PendingInput,
    options: OwnerOptions = {},
  ): Promise<PendingConfirmation> {
    return this.#state.setPendingConfirmation(sessionId, input, options);
  }

  /**
   * Takes the pending confirmation to execute it: returned to exactly one caller, and null when there
   * is none, it expired, or it is not the one with `id`.
   */
  async confirmPending(
    sessionId: string,
    options: OwnerOptions & { id?: string; now?: number } = {},
  ): Promise<PendingConfirmation | null> {
    return this.#state.takePending(sessionId, options);
  }

  /** Drops the pending confirmation. @returns it, or null when there was none (or it had expired). */
  async cancelPending(
    sessionId: string,
    options: OwnerOptions & { now?: number } = {},
  ): Promise<PendingConfirmation | null> {
    return this.#state.takePending(sessionId, options);
  }

  /**
   * What a user message means for the conversational state, without a model call: a yes or no to
   * the pending confirmation (`expired` when it lapsed), a reference to the latest entity, or none.
   * It changes nothing: call {@link confirmPending} or {@link cancelPending} to act on it.
   */
  async resolve(sessionId: string, text: string, options: OwnerOptions & { now?: number } = {}): Promise<Resolution> {
    return this.#state.resolve(sessionId, text, options);
  }

  /**
   * Erases everything kept about a user: their sessions (messages, branches, summaries, vectors, state)
   * and their memories with their history. A session the user starts meanwhile may survive; call again
   * to be sure. @returns how many sessions and memories were deleted.
   */
  async eraseUser(userId: string): Promise<{ sessions: number; memories: number }> {
    if (typeof userId !== "string" || userId === "")
      throw new ThreadkeepError("invalid_request", "eraseUser needs a user id");
    const store = await this.#core.store;
    let sessions = 0;
    // Deleting moves the listing under a cursor, so each pass lists from the start until none is left.
    for (let pass = 0; pass < 1_000; pass++) {
      const page = await store.listSessions(userId, { limit: 100 });
      if (page.sessions.length === 0) break;
      let deleted = 0;
      for (const session of page.sessions) {
        if (session.userId !== userId) continue;
        if (await this.#core.delete(session.id)) deleted++;
        // Other users' requests run between two deletions: a store that answers without I/O (SQLite)
        // never lets the loop go by itself, and a user of 500 sessions held it 1.4 s.
        await new Promise((resolve) => setImmediate(resolve));
      }
      sessions += deleted;
      if (deleted === 0) break;
    }
    const memories = await store.deleteUserMemories(userId);
    return { sessions, memories };
  }

  /** Deletes sessions inactive longer than `ttlMs`. @returns their ids. */
  async expire(now = Date.now()): Promise<string[]> {
    if (this.settings.ttlMs <= 0) return [];
    const expired = await (await this.#core.store).expire(now - this.settings.ttlMs);
    for (const id of expired) this.#core.compactor.forget(id);
    return expired;
  }

  /** Resolves when the background work under way (summaries, embeddings) is done. */
  async idle(): Promise<void> {
    await this.#core.compactor.idle();
    await this.#core.vectors?.idle();
  }

  /**
   * Embeds every message of every session that lacks a vector of the embedder's model (after an
   * outage, for messages stored before embeddings were on, or after a model change).
   * @returns sessions visited and messages embedded; `onProgress` hears after each session.
   */
  async reindex(
    onProgress?: (done: number, embedded: number) => void,
  ): Promise<{ sessions: number; embedded: number }> {
    return reindex(this.#core, onProgress);
  }

  /** Stops the sweep and closes the store. */
  async close(): Promise<void> {
    if (this.#sweep) clearInterval(this.#sweep);
    await this.idle();
    this.#core.vectors?.close();
    const store = await this.#core.store.catch(() => null);
    await store?.close();
  }
}

/** The methods of {@link Memory}. */
type MemoryMethod = { [K in keyof Memory]: Memory[K] extends (...args: never[]) => unknown ? K : never }[keyof Memory];
/** What {@link Memory} method `K` takes at `I`, less what a {@link SessionHandle} fills in: the owner, the session, the fence. */
type Bound<K extends MemoryMethod, I extends number> = Omit<
  NonNullable<Parameters<Memory[K]>[I]>,
  keyof OwnerOptions | "sessionId" | "fence"
>;
/** What {@link Memory} method `K` returns. */
type Returns<K extends MemoryMethod> = ReturnType<Memory[K]>;

/**
 * A session of one owner, bound for convenience: every method forwards to {@link Memory}, and takes
 * that method's arguments after the session id, the owner filled in. Its types are Memory's, so a
 * method is declared once (in Memory); it lives in this file because Memory makes handles.
 */
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
  info(): Returns<"getSession"> {
    return this.#memory.getSession(this.id, { ...this.#owner(), create: true });
  }
  addMessage(message: MessageInput): Promise<Message> {
    return this.#memory.addMessages(this.id, [message], this.#owner()).then(([stored]) => stored);
  }
  addMessages(
    messages: MessageInput[],
    options: Omit<Bound<"addMessages", 2>, "session"> = {},
  ): Returns<"addMessages"> {
    return this.#memory.addMessages(this.id, messages, { ...options, ...this.#owner() });
  }
  replaceAfter(
    seq: number,
    messages: MessageInput[],
    options: Omit<Bound<"replaceAfter", 3>, "session"> = {},
  ): Returns<"replaceAfter"> {
    return this.#memory.replaceAfter(this.id, seq, messages, { ...options, ...this.#owner() });
  }
  pop(): Returns<"pop"> {
    return this.#memory.pop(this.id, this.#owner());
  }
  listBranches(): Returns<"listBranches"> {
    return this.#memory.listBranches(this.id, this.#owner());
  }
  getBranch(branchId: number): Returns<"getBranch"> {
    return this.#memory.getBranch(this.id, branchId, this.#owner());
  }
  switchBranch(branchId: number): Returns<"switchBranch"> {
    return this.#memory.switchBranch(this.id, branchId, this.#owner());
  }
  branchAt(seq: number, options: Bound<"branchAt", 2> = {}): Returns<"branchAt"> {
    return this.#memory.branchAt(this.id, seq, { ...options, ...this.#owner() });
  }
  getMessages(query: Bound<"getMessages", 1> = {}): Returns<"getMessages"> {
    return this.#memory.getMessages(this.id, { ...query, ...this.#owner() });
  }
  search(text: string, options: Bound<"search", 1> = {}): Returns<"search"> {
    return this.#memory.search(text, { ...options, ...this.#owner(), sessionId: this.id });
  }
  getState(): Returns<"getState"> {
    return this.#memory.getState(this.id, this.#owner());
  }
  updateState(update: Parameters<Memory["updateState"]>[1]): Returns<"updateState"> {
    return this.#memory.updateState(this.id, update, this.#owner());
  }
  context(options: Bound<"buildContext", 1> = {}): Returns<"buildContext"> {
    return this.#memory.buildContext(this.id, { ...options, ...this.#owner() });
  }
  clear(): Returns<"clear"> {
    return this.#memory.clear(this.id, this.#owner());
  }
  undoTurn(): Returns<"undoTurn"> {
    return this.#memory.undoTurn(this.id, this.#owner());
  }
  async fork(options: Bound<"fork", 1> = {}): Promise<SessionHandle> {
    const fork = await this.#memory.fork(this.id, { ...options, ...this.#owner() });
    return new SessionHandle(this.#memory, fork.id, this.userId);
  }
  delete(): Returns<"deleteSession"> {
    return this.#memory.deleteSession(this.id, this.#owner());
  }
  conversation(): Returns<"getConversation"> {
    return this.#memory.getConversation(this.id, this.#owner());
  }
  resolve(text: string, options: Bound<"resolve", 2> = {}): Returns<"resolve"> {
    return this.#memory.resolve(this.id, text, { ...options, ...this.#owner() });
  }
  addReference(entity: Parameters<Memory["addReference"]>[1]): Returns<"addReference"> {
    return this.#memory.addReference(this.id, entity, this.#owner());
  }
  setIntent(name: string): Returns<"setIntent"> {
    return this.#memory.setIntent(this.id, name, this.#owner());
  }
  setPendingConfirmation(input: Parameters<Memory["setPendingConfirmation"]>[1]): Returns<"setPendingConfirmation"> {
    return this.#memory.setPendingConfirmation(this.id, input, this.#owner());
  }
  confirmPending(options: Bound<"confirmPending", 1> = {}): Returns<"confirmPending"> {
    return this.#memory.confirmPending(this.id, { ...options, ...this.#owner() });
  }
  cancelPending(): Returns<"cancelPending"> {
    return this.#memory.cancelPending(this.id, this.#owner());
  }
  setPreferences(
    preferences: Parameters<Memory["setPreferences"]>[1],
    options: Bound<"setPreferences", 2> = {},
  ): Returns<"setPreferences"> {
    return this.#memory.setPreferences(this.id, preferences, { ...options, ...this.#owner() });
  }
  recall(text: string, options: Bound<"recall", 2> = {}): Returns<"recall"> {
    return this.#memory.recall(this.id, text, { ...options, ...this.#owner() });
  }
}
