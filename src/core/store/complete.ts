/**
 * The one place where what a store lacks is made up for. `completeStore` turns any
 * {@link SessionStore} (twelve required methods) into a {@link FullStore}: each capability the
 * store does not implement is derived from the required methods where it can be (substring search
 * over reads, counting, reading several ranges range by range and several sessions one by one,
 * opening a turn call by call, owner checks before a call, replacing by truncate and append) and
 * fails with a coded `capability_missing` where it cannot (keeping branches, summaries, state and
 * memories about users, sweeping every session). Nothing outside this file asks a store what it can
 * do, except for what it describes (`persistent`, `fullTextSearch`, `vectors`, …).
 *
 * A store that implements everything natively is returned as it is: the built-in SQLite, PostgreSQL
 * and Redis stores pay nothing for this layer.
 */
import { SessionNotFoundError, ThreadkeepError } from "../errors.js";
import { validateMessages } from "../messages.js";
import type {
  AppendOptions,
  FullStore,
  Lease,
  LeaseOptions,
  Message,
  MessageInput,
  MessageQuery,
  MessageRange,
  OpenedTurn,
  OwnerScope,
  ReplaceOptions,
  SearchHit,
  SearchQuery,
  Session,
  SessionStore,
  TurnOpening,
} from "../types.js";
import {
  hasBranches,
  hasCombinedTurn,
  hasCounts,
  hasMemoryOwners,
  hasRangeReads,
  hasRetention,
  hasSearch,
  hasSessionBatchReads,
  hasState,
  hasSummaries,
  hasUserMemories,
} from "../types.js";
import { readTurn, withLease } from "../open-turn.js";
import { checkOwner, checkSearchQuery, isOwned, DEFAULT_SEARCH_LIMIT, rankHits, substringHits } from "./helpers.js";
import { rankByRelevanceInSlices, type SessionMessages } from "./relevance.js";

/** How many of an owner's newest sessions, and of their newest messages each, a derived search reads. */
export const DERIVED_SEARCH_BOUNDS = { sessions: 200, messagesPerSession: 2_000 } as const;

/** Completed stores and the store each was made of. */
const completed = new WeakMap<object, SessionStore>();

/** The store a {@link completeStore} result was made of (the store itself when nothing was laid over it). */
export function storeBehind(store: SessionStore): SessionStore {
  return completed.get(store) ?? store;
}

/** The error of a capability the store lacks and nothing can derive. */
export function capabilityMissing(store: SessionStore, capability: string, what: string): ThreadkeepError {
  return new ThreadkeepError("capability_missing", `The ${store.name} store has no ${capability}: it cannot ${what}`, {
    details: { store: store.name, capability },
  });
}

/** True when `store` needs nothing from {@link completeStore}. */
function isNativelyComplete(store: SessionStore): boolean {
  const c = store.capabilities;
  return (
    hasBranches(store) &&
    hasSummaries(store) &&
    hasState(store) &&
    hasSearch(store) &&
    hasRetention(store) &&
    hasCounts(store) &&
    hasRangeReads(store) &&
    hasSessionBatchReads(store) &&
    hasCombinedTurn(store) &&
    hasUserMemories(store) &&
    hasMemoryOwners(store) &&
    c.ownerScope === true &&
    c.guardedAppends === true &&
    c.idempotentWrites === true
  );
}

/**
 * Makes any store complete; see the file's comment. Idempotent, and free for a store that needs nothing.
 * Members the contract does not name (a backend's own extras) stay reachable on the result.
 */
export function completeStore(store: SessionStore): FullStore {
  if (completed.has(store) || isNativelyComplete(store)) return store as FullStore;
  const filled = new Fallbacks(store).build();
  completed.set(filled, store);
  return filled;
}

/** The fallbacks of one store; `build()` lays them over it (the store stays the prototype). */
class Fallbacks {
  readonly #store: SessionStore;
  readonly #caps: SessionStore["capabilities"];
  /** Leases this layer handed out, by session and fence: a write with `releaseLease` gives its lease back after it applies. */
  readonly #held = new Map<string, Lease>();
  #built: FullStore | undefined;

  constructor(store: SessionStore) {
    this.#store = store;
    this.#caps = store.capabilities;
  }

  build(): FullStore {
    const store = this.#store;
    const own: Partial<FullStore> = {
      appendMessages: (id, messages, options) => this.#append(id, messages, options),
      getMessages: (id, query) => this.#read(id, query),
      acquireLease: (id, options) => this.#acquire(id, options),
      openTurn: (id, opening) => this.#openTurn(id, opening),
    };
    if (!hasBranches(store)) {
      Object.assign(own, {
        replaceAfter: (id: string, seq: number, messages: MessageInput[], options?: ReplaceOptions) =>
          this.#replace(id, seq, messages, options),
        listBranches: async () => [],
        switchBranch: () => Promise.reject(capabilityMissing(store, "branches", "switch to a branch")),
        saveBranch: () => Promise.reject(capabilityMissing(store, "branches", "keep a branch")),
      } satisfies Partial<FullStore>);
    } else {
      own.replaceAfter = (id, seq, messages, options) => this.#replace(id, seq, messages, options);
    }
    if (!hasSummaries(store)) {
      Object.assign(own, {
        listSummaries: async () => [],
        saveSummary: () => Promise.reject(capabilityMissing(store, "summaries", "keep a summary")),
      } satisfies Partial<FullStore>);
    }
    if (!hasState(store)) {
      Object.assign(own, {
        getState: async () => ({ version: 0, data: {} }),
        setState: () => Promise.reject(capabilityMissing(store, "state", "keep session state")),
      } satisfies Partial<FullStore>);
    }
    if (!hasSearch(store)) own.search = (query) => this.#search(query);
    if (!hasRetention(store)) {
      Object.assign(own, {
        listAllSessions: () => Promise.reject(capabilityMissing(store, "session enumeration", "list every session")),
        expire: () => Promise.reject(capabilityMissing(store, "session enumeration", "sweep sessions past a time")),
      } satisfies Partial<FullStore>);
    }
    if (!hasUserMemories(store)) {
      // No memories: none are listed, and a user's erase finds none to delete.
      const refuse = () => Promise.reject(capabilityMissing(store, "user memories", "keep memories about a user"));
      Object.assign(own, {
        addUserMemory: refuse,
        getUserMemory: async () => null,
        listUserMemories: async () => ({ memories: [], nextCursor: null }),
        updateUserMemory: refuse,
        deleteUserMemory: async () => false,
        deleteUserMemories: async () => 0,
      } satisfies Partial<FullStore>);
    }
    if (!hasMemoryOwners(store)) {
      // A store with memories it cannot enumerate refuses: an export or migration of the whole store
      // would otherwise leave them behind without a word.
      own.listMemoryOwners = hasUserMemories(store)
        ? () => Promise.reject(capabilityMissing(store, "memory owner enumeration", "list the users who have memories"))
        : async () => ({ userIds: [], nextCursor: null });
    }
    if (!hasCounts(store)) own.countMessages = async (id) => (await store.getMessages(id)).length;
    if (!hasRangeReads(store)) own.getMessageRanges = (ranges, owner) => this.#readRanges(ranges, owner);
    if (!hasSessionBatchReads(store)) own.getSessions = (ids) => this.#sessions(ids);
    // The store is the prototype: its extras (and its `name`, `capabilities`) stay reachable.
    this.#built = Object.assign(Object.create(store) as FullStore, own);
    return this.#built;
  }

  /** The owner and expiry check a store without `ownerScope` does not make in the call's own step. */
  async #checkOwner(id: string, owner: OwnerScope | undefined): Promise<void> {
    if (!owner || this.#caps.ownerScope) return;
    checkOwner(id, owner, await this.#store.getSession(id));
  }

  /** The `sessionCreatedAt` check of a store without `guardedAppends`: read just before the write. */
  async #checkIncarnation(id: string, sessionCreatedAt: number | undefined): Promise<void> {
    if (sessionCreatedAt === undefined || this.#caps.guardedAppends) return;
    const session = await this.#store.getSession(id);
    if (!session || session.createdAt !== sessionCreatedAt) throw new SessionNotFoundError(id);
  }

  /** The options of a write as this store understands them. */
  #writeOptions<T extends AppendOptions>(options: T): T {
    const out: T = { ...options };
    if (!this.#caps.ownerScope) delete out.owner;
    if (!this.#caps.guardedAppends) delete out.sessionCreatedAt;
    if (!this.#caps.idempotentWrites) delete out.operationId;
    if (!this.#caps.combinedTurn) delete out.releaseLease;
    if (!hasSummaries(this.#store)) {
      // Without summaries nothing is summarised, so a cap bounded by them drops nothing but what
      // passes the ceiling: that is a plain cap.
      if (out.keepUnsummarized) {
        if (out.hardCap && out.hardCap > 0) out.maxMessages = out.hardCap;
        else delete out.maxMessages;
      }
      delete out.keepUnsummarized;
      delete out.hardCap;
    }
    return out;
  }

  /** Whether a write with these options needs anything of this layer. */
  #plain(options: AppendOptions): boolean {
    const c = this.#caps;
    return (
      (options.owner === undefined || c.ownerScope === true) &&
      (options.sessionCreatedAt === undefined || c.guardedAppends === true) &&
      (options.operationId === undefined || c.idempotentWrites === true) &&
      (!options.releaseLease || c.combinedTurn === true) &&
      (options.keepUnsummarized === undefined || hasSummaries(this.#store))
    );
  }

  #append(id: string, messages: MessageInput[], options: AppendOptions = {}): Promise<Message[]> {
    // Most writes need nothing of this layer; they cost no extra promise.
    if (this.#plain(options)) return this.#store.appendMessages(id, messages, options);
    return this.#appendHelped(id, messages, options);
  }

  async #appendHelped(id: string, messages: MessageInput[], options: AppendOptions): Promise<Message[]> {
    await this.#checkOwner(id, options.owner);
    await this.#checkIncarnation(id, options.sessionCreatedAt);
    const added = await this.#store.appendMessages(id, messages, this.#writeOptions(options));
    await this.#released(id, options);
    return added;
  }

  async #read(id: string, query: MessageQuery = {}): Promise<Message[]> {
    if (!query.owner || this.#caps.ownerScope) return this.#store.getMessages(id, query);
    await this.#checkOwner(id, query.owner);
    const { owner: _owner, ...rest } = query;
    return this.#store.getMessages(id, rest);
  }

  /**
   * Several ranges, range by range and all at once: each an owner-scoped read (on a store without
   * `ownerScope`, each session is read once and checked, then its ranges read plainly). A session that
   * fails the check reads as empty.
   */
  async #readRanges(ranges: readonly MessageRange[], owner: OwnerScope): Promise<Message[][]> {
    const store = this.#store;
    if (this.#caps.ownerScope) {
      return Promise.all(
        ranges.map(({ sessionId, fromSeq, toSeq }) =>
          store.getMessages(sessionId, { fromSeq, toSeq, owner }).catch((error: unknown) => {
            if (error instanceof ThreadkeepError && error.code === "session_not_found") return [] as Message[];
            throw error;
          }),
        ),
      );
    }
    const ids = [...new Set(ranges.map((range) => range.sessionId))];
    const sessions = await this.#sessions(ids);
    const owned = new Set(ids.filter((_id, i) => isOwned(owner, sessions[i])));
    return Promise.all(
      ranges.map(({ sessionId, fromSeq, toSeq }) =>
        owned.has(sessionId) ? store.getMessages(sessionId, { fromSeq, toSeq }) : Promise.resolve([]),
      ),
    );
  }

  /** Several sessions: in one call on a store that reads them so, else each with `getSession`, all at once. */
  #sessions(ids: readonly string[]): Promise<(Session | null)[]> {
    const store = this.#store;
    if (hasSessionBatchReads(store)) return store.getSessions(ids);
    return Promise.all(ids.map((id) => store.getSession(id)));
  }

  async #replace(id: string, seq: number, messages: MessageInput[], options: ReplaceOptions = {}): Promise<Message[]> {
    const store = this.#store;
    await this.#checkOwner(id, options.owner);
    await this.#checkIncarnation(id, options.sessionCreatedAt);
    if (hasBranches(store)) {
      const replaced = await store.replaceAfter(id, seq, messages, this.#writeOptions(options));
      await this.#released(id, options);
      return replaced;
    }
    // Derived: check, truncate, append. Two steps, so only under the turn lease is it atomic.
    const valid = validateMessages(messages); // before anything is removed: a bad batch changes nothing
    if (!Number.isInteger(seq) || seq < 0)
      throw new ThreadkeepError("invalid_request", `Seq must be a non-negative integer, got ${seq}`);
    const session = await store.getSession(id);
    if (!session) throw new SessionNotFoundError(id);
    const [last] = await store.getMessages(id, { last: 1 });
    const lastSeq = last?.seq ?? 0;
    if (options.expectedLastSeq !== undefined && options.expectedLastSeq !== lastSeq) {
      throw new ThreadkeepError(
        "history_conflict",
        `Session ${id} ends at seq ${lastSeq}, not ${options.expectedLastSeq}`,
      );
    }
    const [first] = await store.getMessages(id, { limit: 1 });
    const floor = first ? first.seq - 1 : lastSeq;
    if (seq < floor || seq > lastSeq) {
      throw new ThreadkeepError(
        "history_conflict",
        `Seq ${seq} is not on session ${id} (it holds ${floor + 1}..${lastSeq})`,
      );
    }
    if (options.branch && seq < lastSeq)
      throw capabilityMissing(store, "branches", "keep the messages a regenerate or edit replaces");
    const { branch: _branch, expectedLastSeq: _expected, ...write } = options;
    if (seq < lastSeq) {
      if (options.fence !== undefined) await store.appendMessages(id, [], { fence: options.fence }); // a stale fence truncates nothing
      await store.truncateAfter(id, seq);
    }
    const added = await store.appendMessages(id, valid, this.#writeOptions(write));
    await this.#released(id, options);
    return added;
  }

  async #acquire(id: string, options?: LeaseOptions): Promise<Lease> {
    const lease = await this.#store.acquireLease(id, options);
    if (this.#caps.combinedTurn) return lease;
    const key = `${id}\u0000${lease.fence}`;
    this.#held.set(key, lease);
    const release = lease.release.bind(lease);
    return Object.assign(Object.create(lease) as Lease, {
      release: async () => {
        this.#held.delete(key);
        await release();
      },
    });
  }

  /** `releaseLease` on a store that cannot release in the write: give the lease back right after it. */
  async #released(id: string, options: AppendOptions): Promise<void> {
    if (!options.releaseLease || options.fence === undefined || this.#caps.combinedTurn) return;
    const key = `${id}\u0000${options.fence}`;
    const lease = this.#held.get(key);
    this.#held.delete(key);
    // The write applied; a release that fails leaves the lease to lapse, as a crashed holder's would.
    await lease?.release().catch(() => {});
  }

  async #openTurn(id: string, opening: TurnOpening): Promise<OpenedTurn> {
    const store = this.#store;
    if (hasCombinedTurn(store)) return store.openTurn(id, opening);
    const filled = this.#built ?? completeStore(store);
    const lease = await this.#acquire(id, opening.lease);
    return withLease(lease, async () =>
      readTurn(await store.getSession(id), opening, async (session) => {
        const [messages, summaries, state] = await Promise.all([
          opening.last > 0 ? store.getMessages(id, { last: opening.last }) : Promise.resolve([]),
          filled.listSummaries(id),
          filled.getState(id),
        ]);
        return { status: "ok" as const, session, messages, summaries, state };
      }),
    );
  }

  /** Substring search (or, with `ranking: "relevance"`, BM25 in code) over reads: the owner's newest sessions, each's newest messages (see {@link DERIVED_SEARCH_BOUNDS}). */
  async #search(query: SearchQuery): Promise<SearchHit[]> {
    const store = this.#store;
    checkSearchQuery(query);
    const relevance = query.ranking === "relevance";
    if (query.mode === "fulltext" && !relevance)
      throw new ThreadkeepError("not_supported", `The ${store.name} store has no full-text search; use substring`);
    const sessions: Session[] = [];
    if (query.sessionId) {
      const session = await store.getSession(query.sessionId);
      if (session && session.userId === query.userId) sessions.push(session);
    } else {
      let cursor: string | null = null;
      do {
        const page = await store.listSessions(query.userId, { limit: 100, cursor });
        sessions.push(...page.sessions);
        cursor = page.nextCursor;
      } while (cursor && sessions.length < DERIVED_SEARCH_BOUNDS.sessions);
    }
    const searched: SessionMessages[] = [];
    for (const session of sessions.slice(0, DERIVED_SEARCH_BOUNDS.sessions)) {
      if (query.activeSince !== undefined && session.lastActivityAt < query.activeSince) continue;
      searched.push({
        sessionId: session.id,
        messages: await store.getMessages(session.id, {
          last: DERIVED_SEARCH_BOUNDS.messagesPerSession,
          afterSeq: query.afterSeq,
          beforeSeq: query.beforeSeq,
        }),
      });
    }
    if (relevance) return rankByRelevanceInSlices(searched, query.text, query.limit ?? DEFAULT_SEARCH_LIMIT);
    return rankHits(
      searched.flatMap((s) => substringHits(s.sessionId, [...s.messages], query.text)),
      query.limit,
    );
  }
}

/**
 * Waits for the session's turn lease and reads the turn's data (see {@link OpenedTurn}): in one round
 * trip on a store with `capabilities.combinedTurn`, call by call on others. On any failure after the
 * grant the lease is given back before the error is thrown.
 */
export function openTurn(store: SessionStore, sessionId: string, opening: TurnOpening): Promise<OpenedTurn> {
  // Always there: completeStore lays it over a store without it (natively complete ones have it).
  return completeStore(store).openTurn!(sessionId, opening);
}
