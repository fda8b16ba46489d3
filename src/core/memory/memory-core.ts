import { Compactor } from "../context/compaction.js";
import { DEFAULT_MEMORY_CONTEXT, type MemoryContextOptions } from "../context/user-memories.js";
import { DEFAULT_RECALL, type RecallOptions } from "../context/recall.js";
import { BackgroundEmbedder } from "../embeddings.js";
import { isThreadkeepError, SessionNotFoundError, ThreadkeepError } from "../errors.js";
import { isValidSessionId, parseSessionId } from "../ids.js";
import type { KeptLease } from "../lease-keeper.js";
import { checkJson } from "../json-limits.js";
import type { MemoryInit, MemorySettings, OwnerOptions } from "./memory-options.js";
import { DEFAULTS } from "../policies.js";
import { createResolver, type Resolver } from "../state/references.js";
import type { StateAccess } from "../state/session-state.js";
import { capabilityMissing, completeStore } from "../store/complete.js";
import { type FullStore, hasSummaries, type OwnerScope, type Session, type SessionStore } from "../types.js";

/** What a {@link Memory}'s modules share: the store, the settings, and the owner checks of a session. */
export class MemoryCore {
  readonly settings: MemorySettings;
  /** The store as core uses it: whatever it lacks made up for by {@link completeStore}. */
  readonly store: Promise<FullStore>;
  /** The store once opened: the hot paths take it without awaiting {@link store} (a microtask turn each). */
  opened?: FullStore;
  readonly compactor: Compactor;
  readonly resolver: Resolver;
  readonly vectors?: BackgroundEmbedder;
  readonly recall: Required<RecallOptions>;
  readonly memoryContext: Required<MemoryContextOptions>;
  /** Heartbeats of the turns running in {@link Memory.runTurn}, by `keeperKey(sessionId, fence)`. */
  readonly keepers = new Map<string, KeptLease>();

  constructor(options: MemoryInit) {
    const storeOption = options.store;
    this.store = Promise.resolve(storeOption).then((store: SessionStore) => {
      // Summaries are what a summarizer makes: a store that cannot keep them is refused up front.
      if (options.summarizer && !hasSummaries(store))
        throw capabilityMissing(store, "summaries", "keep what the summarizer writes");
      return completeStore(store);
    });
    // A failed open is reported by the first call that needs the store, not as an unhandled rejection.
    this.store.then(
      (store) => {
        this.opened = store;
      },
      () => {},
    );
    // A store still opening comes from a URL, and createMemory has set the in-memory store's expiry.
    const inMemory = !(storeOption instanceof Promise) && storeOption.name === "memory";
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
        ...(options.compaction?.hardCap === undefined ? {} : { hardCap: options.compaction.hardCap }),
      },
      stateNote: options.stateNote ?? true,
    };
    this.compactor = new Compactor(options.summarizer, {
      window: this.settings.window,
      maxMessages: this.settings.maxMessages,
      ...this.settings.compaction,
    });
    this.resolver = createResolver(options.resolver);
    if (options.embedder) this.vectors = new BackgroundEmbedder(options.embedder, options.embedding);
    this.recall = { ...DEFAULT_RECALL, ...options.recall };
    const { budgetShare, scope } = this.recall;
    if (!(budgetShare >= 0 && budgetShare <= 1))
      throw new ThreadkeepError("invalid_request", `recall.budgetShare must be between 0 and 1, got ${budgetShare}`, {
        details: { field: "recall.budgetShare" },
      });
    if (scope !== "session" && scope !== "user")
      throw new ThreadkeepError(
        "invalid_request",
        `recall.scope must be "session" or "user", got ${JSON.stringify(scope)}`,
        { details: { field: "recall.scope" } },
      );
    this.memoryContext = { ...DEFAULT_MEMORY_CONTEXT, ...options.memoryContext };
  }

  owner(options?: OwnerOptions): string {
    return options?.userId ?? this.settings.defaultUserId;
  }

  #isExpired(session: Session): boolean {
    return this.settings.ttlMs > 0 && session.lastActivityAt < Date.now() - this.settings.ttlMs;
  }

  /**
   * The caller's session. A missing (or expired) one is created when `create` is set; another owner's
   * is `session_not_found`, whatever `create` says.
   */
  async resolve(
    sessionId: string,
    userId: string,
    create: boolean,
    metadata?: Record<string, unknown>,
    known?: Session,
  ): Promise<Session> {
    return (await this.open(sessionId, userId, create, metadata, known)).session;
  }

  /** {@link resolve}, also saying whether this call created the session. */
  async open(
    sessionId: string,
    userId: string,
    create: boolean,
    metadata?: Record<string, unknown>,
    known?: Session,
  ): Promise<{ session: Session; created: boolean }> {
    const id = parseSessionId(sessionId);
    const store = await this.store;
    let session = await this.find(id, userId, known);
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
  async find(id: string, userId: string, known?: Session): Promise<Session | null> {
    // A turn resolves its session once and hands the record on; it must still be this caller's.
    if (known && known.id === id && known.userId === userId) return known;
    const store = await this.store;
    const session = await store.getSession(id);
    if (!session) return null;
    if (session.userId !== userId) throw new SessionNotFoundError(id);
    if (!this.#isExpired(session)) return session;
    await this.delete(id);
    return null;
  }

  /** True when `userId`'s session `id` exists and has not expired. A read only: an expired one is left to the sweep. */
  async isLive(id: string, userId: string): Promise<boolean> {
    if (!isValidSessionId(id)) return false;
    const session = await (await this.store).getSession(id.toLowerCase());
    return session !== null && session.userId === userId && !this.#isExpired(session);
  }

  /**
   * Deletes a session, and what this Memory remembers of it (the compaction hint): a session made
   * again under the same id must not inherit what the old one had summarised.
   */
  async delete(id: string): Promise<boolean> {
    this.compactor.forget(id);
    return (await this.store).deleteSession(id);
  }

  /** The owner scope of a store call: this owner, and sessions active within the TTL. */
  scope(userId: string): OwnerScope {
    return this.settings.ttlMs > 0 ? { userId, activeSince: Date.now() - this.settings.ttlMs } : { userId };
  }

  async access(sessionId: string, options: OwnerOptions, create = true): Promise<StateAccess> {
    const session = await this.resolve(sessionId, this.owner(options), create);
    return { store: await this.store, sessionId: session.id };
  }
}
