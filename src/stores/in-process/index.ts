import { SessionNotFoundError, StateConflictError, ThreadkeepError } from "../../core/errors.js";
import { validateMessages } from "../../core/messages.js";
import type {
  AppendOptions,
  ListOptions,
  Message,
  MessageInput,
  MessageQuery,
  SearchHit,
  SearchQuery,
  Session,
  SessionInput,
  SessionPage,
  SessionState,
  Summary,
  SummaryInput,
  Branch,
  EmbeddingInput,
  ReplaceOptions,
  VectorQuery,
  FullStore,
  VectorStore,
  UserMemoryVectorStore,
} from "../../core/types.js";
import { checkDimensions, missingSeqs, normalize, scanSession, type StoredVector, TopK } from "../_vectors.js";
import { inProcessUserMemories } from "./_user-memories.js";
import {
  applyBranchSwitch,
  applyHistoryWrite,
  branchFromRecord,
  checkHistoryOptions,
  type OperationRecord,
  planBranchSwitch,
  planHistoryWrite,
  upsertBranch,
} from "../history.js";
import { LocalLeases } from "../_lease.js";
import {
  checkIncarnation,
  checkOwner,
  isOwned,
  checkSummarySession,
  applyMessageQuery,
  checkSearchQuery,
  copySession,
  inactiveSince,
  pageAllSessions,
  pageOwnerSessions,
  rankHits,
  sessionFromInput,
  substringHits,
  DEFAULT_SEARCH_LIMIT,
  rankByRelevanceInSlices,
  withinSeqBounds,
} from "../_util.js";

/** The backend name of the in-memory store. */
export const MEMORY_STORE_NAME = "memory";

/** Options of {@link createMemoryStore}. */
export interface MemoryStoreOptions {
  /** Sessions inactive this long are evicted (lazily on access, and by the sweep). 0 disables. @default 1800000 (30 min) */
  ttlMs?: number;
  /** How often the background sweep runs; it never keeps the process alive. 0 disables. @default 60000 */
  sweepIntervalMs?: number;
  /** Most sessions kept; past it the least recently active is evicted, so memory stays bounded. @default 10000 */
  maxSessions?: number;
}

interface Entry {
  session: Session;
  messages: Message[];
  summaries: Summary[];
  nextSummaryId: number;
  state: SessionState;
  branches: Branch[];
  operations: OperationRecord[];
}

/**
 * An in-process store: fast, bounded, and gone when the process ends.
 * @example
 * ```ts
 * import { createMemory, createMemoryStore } from "threadkeep";
 *
 * const memory = createMemory({ store: createMemoryStore({ ttlMs: 30 * 60_000 }) });
 * ```
 */
export function createMemoryStore(options: MemoryStoreOptions = {}): FullStore & VectorStore & UserMemoryVectorStore {
  const ttlMs = options.ttlMs ?? 30 * 60_000;
  const maxSessions = options.maxSessions ?? 10_000;
  const sweepIntervalMs = options.sweepIntervalMs ?? 60_000;
  // Map order is least recently active first: every activity re-inserts the entry at the end.
  const entries = new Map<string, Entry>();
  const leases = new LocalLeases();
  // Vectors hang off their session's entry: a deleted or re-created session takes none along.
  const vectors = new WeakMap<Entry, Map<number, StoredVector>>();
  const dimensions = new Map<string, number>();
  let closed = false;

  const isExpired = (entry: Entry, now = Date.now()) => ttlMs > 0 && entry.session.lastActivityAt < now - ttlMs;

  const remove = (id: string) => {
    entries.delete(id);
    leases.forget(id);
  };

  const sweep = () => {
    const now = Date.now();
    for (const [id, entry] of entries) if (isExpired(entry, now)) remove(id);
  };
  const timer = sweepIntervalMs > 0 && ttlMs > 0 ? setInterval(sweep, sweepIntervalMs) : undefined;
  timer?.unref();

  const ensureOpen = () => {
    if (closed) throw new ThreadkeepError("store_unavailable", "The memory store is closed");
  };
  const userMemories = inProcessUserMemories(ensureOpen);

  /** The live entry, evicting it first if it expired. */
  const find = (id: string): Entry | undefined => {
    ensureOpen();
    const entry = entries.get(id);
    if (entry && isExpired(entry)) {
      remove(id);
      return undefined;
    }
    return entry;
  };

  /** A copy of the live session, or null. */
  const readSession = (id: string): Session | null => {
    const entry = find(id);
    return entry ? copySession(entry.session) : null;
  };

  const need = (id: string): Entry => {
    const entry = find(id);
    if (!entry) throw new SessionNotFoundError(id);
    return entry;
  };

  const activity = (id: string, entry: Entry, at: number) => {
    entry.session.lastActivityAt = at;
    entries.delete(id);
    entries.set(id, entry);
  };

  const write = async (id: string, seq: number | undefined, inputs: MessageInput[], options: ReplaceOptions) => {
    const valid = validateMessages(inputs);
    checkHistoryOptions(options, seq);
    const entry = need(id);
    checkOwner(id, options.owner, entry.session);
    checkIncarnation(id, entry.session, options.sessionCreatedAt);
    const now = Date.now();
    const plan = planHistoryWrite(entry, seq, valid, options, now, () => leases.check(id, options.fence));
    if (plan.replayed) return plan.replayed;
    applyHistoryWrite(entry, plan);
    activity(id, entry, now);
    return structuredClone(plan.added);
  };

  return {
    name: MEMORY_STORE_NAME,
    capabilities: {
      persistent: false,
      fullTextSearch: false,
      crossProcessLease: false,
      nativeExpiry: true,
      vectors: true,
      ownerScope: true,
      guardedAppends: true,
      idempotentWrites: true,
    },

    async putEmbeddings(id: string, model: string, items: EmbeddingInput[]) {
      const entry = need(id);
      for (const item of items) checkDimensions(model, dimensions.get(model), item.vector.length);
      if (items.length > 0) dimensions.set(model, items[0].vector.length);
      const map = vectors.get(entry) ?? new Map<number, StoredVector>();
      vectors.set(entry, map);
      for (const item of items) {
        map.set(item.seq, { seq: item.seq, createdAt: item.createdAt, model, vector: normalize(item.vector) });
      }
    },

    async missingEmbeddings(id: string, model: string, limit = 1000) {
      const entry = find(id);
      if (!entry) return [];
      return missingSeqs(entry.messages, vectors.get(entry)?.values() ?? [], model, limit);
    },

    async searchVectors(query: VectorQuery) {
      ensureOpen();
      const normalized = normalize(query.vector);
      checkDimensions(query.model, dimensions.get(query.model), normalized.length);
      const top = new TopK(query.limit);
      const candidates = query.sessionId ? [find(query.sessionId)] : [...entries.values()];
      for (const entry of candidates) {
        if (
          !entry ||
          entry.session.userId !== query.userId ||
          isExpired(entry) ||
          inactiveSince(entry.session, query.activeSince)
        )
          continue;
        const map = vectors.get(entry);
        if (map) scanSession(entry.session.id, entry.messages, map.values(), query, normalized, top);
      }
      return structuredClone(top.hits);
    },

    async createSession(input: SessionInput) {
      if (find(input.id)) throw new ThreadkeepError("session_exists", `Session ${input.id} already exists`);
      const session = sessionFromInput(input);
      entries.set(input.id, {
        session,
        messages: [],
        summaries: [],
        nextSummaryId: 1,
        state: { version: 0, data: {} },
        branches: [],
        operations: [],
      });
      while (entries.size > maxSessions) {
        const oldest = entries.keys().next().value as string;
        remove(oldest);
      }
      return copySession(session);
    },

    async getSession(id) {
      return readSession(id);
    },

    async getSessions(ids) {
      return ids.map(readSession);
    },

    async listSessions(userId: string, options: ListOptions = {}): Promise<SessionPage> {
      ensureOpen();
      sweep();
      return pageOwnerSessions(
        [...entries.values()].map((e) => e.session),
        userId,
        options,
      );
    },

    async listAllSessions(options: ListOptions = {}): Promise<SessionPage> {
      ensureOpen();
      return pageAllSessions(
        [...entries.values()].filter((e) => !isExpired(e)).map((e) => e.session),
        options,
      );
    },

    async deleteSession(id) {
      if (!find(id)) return false;
      remove(id);
      return true;
    },

    async touchSession(id, at = Date.now()) {
      activity(id, need(id), at);
    },

    async updateSessionMetadata(id, metadata) {
      const entry = need(id);
      entry.session.metadata = structuredClone(metadata);
      return copySession(entry.session);
    },

    async appendMessages(id: string, inputs: MessageInput[], options: AppendOptions = {}) {
      return write(id, undefined, inputs, options);
    },

    async replaceAfter(id: string, seq: number, inputs: MessageInput[], options: ReplaceOptions = {}) {
      return write(id, seq, inputs, options);
    },

    async listBranches(id) {
      return structuredClone(find(id)?.branches ?? []);
    },

    async switchBranch(id, branchId, options = {}) {
      const entry = need(id);
      leases.check(id, options.fence);
      const plan = planBranchSwitch(entry, branchId);
      applyBranchSwitch(entry, plan);
      activity(id, entry, Date.now());
      return structuredClone(plan.branch);
    },

    async saveBranch(id, record) {
      const entry = need(id);
      const branch = branchFromRecord(record, (entry.branches.at(-1)?.id ?? 0) + 1);
      upsertBranch(entry.branches, branch);
      return structuredClone(branch);
    },

    async getMessages(id: string, query?: MessageQuery) {
      const entry = find(id);
      checkOwner(id, query?.owner, entry?.session);
      return entry ? structuredClone(applyMessageQuery(entry.messages, query)) : [];
    },

    async getMessageRanges(ranges, owner) {
      return ranges.map(({ sessionId, fromSeq, toSeq }) => {
        const entry = find(sessionId);
        return entry && isOwned(owner, entry.session)
          ? structuredClone(applyMessageQuery(entry.messages, { fromSeq, toSeq }))
          : [];
      });
    },

    async countMessages(id) {
      return find(id)?.messages.length ?? 0;
    },

    async popMessage(id) {
      const popped = need(id).messages.pop();
      return popped ? structuredClone(popped) : null;
    },

    async truncateAfter(id, seq) {
      const entry = need(id);
      const keep = entry.messages.filter((m) => m.seq <= seq);
      const removed = entry.messages.length - keep.length;
      entry.messages = keep;
      return removed;
    },

    async saveSummary(id: string, input: SummaryInput) {
      const entry = need(id);
      checkSummarySession(id, entry.session, input);
      const summary: Summary = {
        id: entry.nextSummaryId++,
        fromSeq: input.fromSeq,
        toSeq: input.toSeq,
        content: input.content,
        createdAt: input.createdAt ?? Date.now(),
        ...(input.metadata ? { metadata: structuredClone(input.metadata) } : {}),
      };
      entry.summaries.push(summary);
      entry.summaries.sort((a, b) => a.fromSeq - b.fromSeq || a.id - b.id);
      return structuredClone(summary);
    },

    async listSummaries(id) {
      return structuredClone(find(id)?.summaries ?? []);
    },

    async getState(id) {
      return structuredClone(need(id).state);
    },

    async setState(id, data, expectedVersion) {
      const entry = need(id);
      if (entry.state.version !== expectedVersion) throw new StateConflictError(expectedVersion, entry.state.version);
      entry.state = { version: expectedVersion + 1, data: structuredClone(data) };
      return structuredClone(entry.state);
    },

    async search(query: SearchQuery) {
      ensureOpen();
      checkSearchQuery(query);
      const candidates = (query.sessionId ? [find(query.sessionId)] : [...entries.values()]).filter(
        (entry): entry is NonNullable<typeof entry> =>
          !!entry &&
          entry.session.userId === query.userId &&
          !isExpired(entry) &&
          !inactiveSince(entry.session, query.activeSince),
      );
      if (query.ranking === "relevance") {
        return rankByRelevanceInSlices(
          candidates.map((e) => ({ sessionId: e.session.id, messages: withinSeqBounds(e.messages, query) })),
          query.text,
          query.limit ?? DEFAULT_SEARCH_LIMIT,
        );
      }
      if (query.mode === "fulltext") {
        throw new ThreadkeepError("not_supported", "The memory store has no full-text search; use substring");
      }
      const hits: SearchHit[] = [];
      for (const entry of candidates) {
        hits.push(...substringHits(entry.session.id, withinSeqBounds(entry.messages, query), query.text));
      }
      return rankHits(hits, query.limit);
    },

    async expire(olderThan) {
      ensureOpen();
      const removed: string[] = [];
      for (const [id, entry] of entries) {
        if (entry.session.lastActivityAt < olderThan) {
          remove(id);
          removed.push(id);
        }
      }
      return removed;
    },

    ...userMemories.methods,

    async acquireLease(id, options) {
      ensureOpen();
      return leases.acquire(id, options);
    },

    async close() {
      closed = true;
      if (timer) clearInterval(timer);
      leases.clear();
      entries.clear();
      userMemories.clear();
    },
  };
}
