/**
 * The JSONL file store, `file:<dir>`: one human-readable, append-only log per session in
 * `<dir>/sessions/<id>.jsonl`, replayed on load. The format is described in docs/file-store.md.
 * One process owns a directory: leases and the write order are held in process memory.
 */
import { resolve } from "node:path";
import { InvalidSessionIdError, SessionNotFoundError, StateConflictError, ThreadkeepError } from "../../core/errors.js";
import { validateMessages } from "../../core/messages.js";
import type {
  FullStore,
  VectorStore,
  UserMemoryVectorStore,
  AppendOptions,
  ListOptions,
  MessageInput,
  SearchQuery,
  SessionPage,
  SummaryInput,
  ReplaceOptions,
} from "../../core/types.js";
import { branchFromRecord, checkHistoryOptions, planBranchSwitch, planHistoryWrite } from "../history.js";
import type { SessionMessages } from "../../core/store/relevance.js";
import type { SessionRecord } from "./_records.js";
import { type Entry, keyOf, SessionFiles } from "./_sessions.js";
import { fileVectorSidecar } from "./_vectors.js";
import { UserMemoryFiles } from "./_user-memories.js";
import { LocalLeases } from "../_lease.js";
import { sidecarVectors } from "../_vector-sidecar.js";
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

/** The backend name of the JSONL file store. */
export const FILE_STORE_NAME = "file";

/** Options of {@link createFileStore}. */
export interface FileStoreOptions {
  /** The directory that holds `sessions/`, `index.jsonl` and `quarantine/`; created when missing. */
  dir: string;
  /** Sessions kept parsed in memory, least recently used dropped first; the rest are re-read on demand. @default 256 */
  cacheSize?: number;
  /** Dead lines (trimmed, popped, superseded) tolerated beyond a file's live lines before it is rewritten. @default 64 */
  compactAfter?: number;
  /** Sync every write to disk before it resolves, so it survives a power cut, not only a crash. @default false */
  fsync?: boolean;
  /** Receives warnings: quarantined lines, index rebuilds, failed background writes. @default console.warn */
  onWarning?: (message: string) => void;
}

/**
 * A store of one JSONL file per session. Writes are single appends of complete lines, so a crash can
 * only tear the last line; bad lines found on load are quarantined, never dropped.
 * @example
 * ```ts
 * import { createMemory } from "threadkeep";
 * import { createFileStore } from "threadkeep/stores/file";
 *
 * const memory = createMemory({ store: createFileStore({ dir: "./data/sessions" }) });
 * ```
 */
export function createFileStore(options: FileStoreOptions): FullStore & VectorStore & UserMemoryVectorStore {
  const dir = resolve(options.dir);
  const files = new SessionFiles({
    dir,
    fsync: options.fsync ?? false,
    cacheSize: options.cacheSize ?? 256,
    compactAfter: options.compactAfter ?? 64,
    warn: options.onWarning ?? ((message: string) => console.warn(message)),
  });
  const { index } = files;
  const memories = new UserMemoryFiles(dir, {
    fsync: options.fsync ?? false,
    warn: options.onWarning ?? ((message: string) => console.warn(message)),
  });
  const leases = new LocalLeases();
  let opening: Promise<void> | null = null;

  const ensureReady = async () => {
    files.ensureOpen();
    opening ??= files.open().catch((error) => {
      opening = null;
      throw error;
    });
    await opening;
    files.ensureOpen();
  };

  /** A loaded session, or null. */
  async function read(id: unknown): Promise<Entry | null> {
    await ensureReady();
    const key = keyOf(id);
    return key ? files.read(key) : null;
  }

  /** Runs a change to one session in that session's turn. @throws `session_not_found`. */
  async function change<T>(id: string, task: (key: string, entry: Entry) => Promise<T>): Promise<T> {
    await ensureReady();
    const key = keyOf(id);
    if (!key) throw new SessionNotFoundError(String(id));
    return files.turn(key, async () => task(key, await files.need(key, id)));
  }

  const remove = async (key: string) => {
    await files.remove(key);
    leases.forget(key);
  };

  /** An append (`seq` undefined) or a tail replacement, as one grouped write. */
  const writeHistory = async (
    id: string,
    seq: number | undefined,
    inputs: MessageInput[],
    writeOptions: ReplaceOptions,
  ) => {
    const valid = validateMessages(inputs);
    checkHistoryOptions(writeOptions, seq);
    return change(id, async (key, entry) => {
      checkOwner(key, writeOptions.owner, entry.session);
      checkIncarnation(key, entry.session, writeOptions.sessionCreatedAt);
      const now = Date.now();
      const plan = planHistoryWrite(entry, seq, valid, writeOptions, now, () => leases.check(key, writeOptions.fence));
      if (plan.replayed) return plan.replayed;
      const records: SessionRecord[] = [];
      if (plan.truncateAfter !== undefined && entry.messages.some((m) => m.seq > plan.truncateAfter!)) {
        records.push({ type: "truncate", afterSeq: plan.truncateAfter });
      }
      records.push(...plan.added.map((message): SessionRecord => ({ type: "message", message })));
      if (plan.trimBeforeSeq !== undefined) records.push({ type: "trim", beforeSeq: plan.trimBeforeSeq });
      if (plan.branch) {
        if (plan.moved.length > 0) records.push({ type: "reparent", ids: plan.moved, parentId: plan.branch.id });
        records.push({ type: "branch", branch: plan.branch });
      }
      if (plan.operation) records.push({ type: "op", ...plan.operation });
      // An empty batch still counts as activity, as in every other store.
      if (plan.added.length === 0) records.push({ type: "touch", at: now });
      // What a reload would read: the records as written, not the inputs.
      const stored = await files.write(key, entry, records);
      return structuredClone(stored.flatMap((r) => (r.type === "message" ? [r.message] : [])));
    });
  };

  const store: FullStore & VectorStore & UserMemoryVectorStore = {
    name: FILE_STORE_NAME,
    capabilities: {
      persistent: true,
      fullTextSearch: false,
      crossProcessLease: false,
      nativeExpiry: false,
      vectors: true,
      ownerScope: true,
      guardedAppends: true,
      idempotentWrites: true,
    },
    ...sidecarVectors(() => store, fileVectorSidecar(dir)),

    async createSession(input) {
      await ensureReady();
      const key = keyOf(input.id);
      if (!key) throw new InvalidSessionIdError(`Invalid session id ${JSON.stringify(String(input.id).slice(0, 100))}`);
      return files.turn(key, async () => {
        const session = sessionFromInput(input);
        const stored = index.sessions.has(key) ? null : await files.create(key, session);
        if (!stored) throw new ThreadkeepError("session_exists", `Session ${input.id} already exists`);
        return copySession(stored);
      });
    },

    async getSession(id) {
      return (await store.getSessions([id]))[0];
    },

    async getSessions(ids) {
      await ensureReady();
      return ids.map((id) => {
        const session = index.sessions.get(keyOf(id) ?? "");
        return session ? copySession(session) : null;
      });
    },

    async listSessions(userId: string, listOptions?: ListOptions): Promise<SessionPage> {
      await ensureReady();
      return pageOwnerSessions(index.sessions.values(), userId, listOptions);
    },

    async listAllSessions(listOptions?: ListOptions): Promise<SessionPage> {
      await ensureReady();
      return pageAllSessions(index.sessions.values(), listOptions);
    },

    async addUserMemory(input) {
      await ensureReady();
      return memories.add(input);
    },

    async listMemoryOwners(listOptions) {
      await ensureReady();
      return memories.owners(listOptions);
    },

    async getUserMemory(userId, id) {
      await ensureReady();
      return memories.get(userId, id);
    },

    async listUserMemories(userId, listOptions) {
      await ensureReady();
      return memories.list(userId, listOptions);
    },

    async updateUserMemory(userId, id, patch) {
      await ensureReady();
      return memories.update(userId, id, patch);
    },

    async deleteUserMemory(userId, id) {
      await ensureReady();
      return memories.delete(userId, id);
    },

    async deleteUserMemories(userId) {
      await ensureReady();
      return memories.deleteAll(userId);
    },

    async putUserMemoryEmbeddings(userId, model, items) {
      await ensureReady();
      return memories.putEmbeddings(userId, model, items);
    },

    async missingUserMemoryEmbeddings(userId, model, limit = 100) {
      await ensureReady();
      return memories.missingEmbeddings(userId, model, limit);
    },

    async searchUserMemoryVectors(query) {
      await ensureReady();
      return memories.searchVectors(query);
    },

    async deleteSession(id) {
      await ensureReady();
      const key = keyOf(id);
      if (!key) return false;
      return files.turn(key, async () => {
        if (!index.sessions.has(key)) return false;
        await remove(key);
        return true;
      });
    },

    async touchSession(id, at = Date.now()) {
      await change(id, (key, entry) => files.write(key, entry, [{ type: "touch", at }]));
    },

    async updateSessionMetadata(id, metadata) {
      return change(id, async (key, entry) => {
        await files.write(key, entry, [{ type: "meta", metadata }]);
        return copySession(entry.session);
      });
    },

    appendMessages: (id: string, inputs: MessageInput[], appendOptions: AppendOptions = {}) =>
      writeHistory(id, undefined, inputs, appendOptions),

    replaceAfter: (id: string, seq: number, inputs: MessageInput[], replaceOptions: ReplaceOptions = {}) =>
      writeHistory(id, seq, inputs, replaceOptions),

    async listBranches(id) {
      return structuredClone((await read(id))?.branches ?? []);
    },

    async switchBranch(id, branchId, switchOptions = {}) {
      return change(id, async (key, entry) => {
        leases.check(key, switchOptions.fence);
        const plan = planBranchSwitch(entry, branchId);
        const records: SessionRecord[] = [
          { type: "truncate", afterSeq: plan.atSeq },
          ...plan.restored.map((message): SessionRecord => ({ type: "message", message })),
          // Restored messages keep their times; the switch itself is the activity.
          { type: "touch", at: Date.now() },
          { type: "reparent", ids: plan.toMain, parentId: null },
          { type: "reparent", ids: plan.toBranch, parentId: plan.branch.id },
          { type: "branch", branch: plan.branch },
        ];
        await files.write(key, entry, records);
        return structuredClone(plan.branch);
      });
    },

    async saveBranch(id, record) {
      return change(id, async (key, entry) => {
        const branch = branchFromRecord(record, (entry.branches.at(-1)?.id ?? 0) + 1);
        await files.write(key, entry, [{ type: "branch", branch }]);
        return structuredClone(branch);
      });
    },

    async getMessages(id, query) {
      const entry = await read(id);
      checkOwner(id, query?.owner, entry?.session);
      return entry ? structuredClone(applyMessageQuery(entry.messages, query)) : [];
    },

    async getMessageRanges(ranges, owner) {
      // Each session read once, however many of its ranges are asked for.
      const entries = new Map<string, ReturnType<typeof read>>();
      for (const { sessionId } of ranges) if (!entries.has(sessionId)) entries.set(sessionId, read(sessionId));
      return Promise.all(
        ranges.map(async ({ sessionId, fromSeq, toSeq }) => {
          const entry = await entries.get(sessionId)!;
          return entry && isOwned(owner, entry.session)
            ? structuredClone(applyMessageQuery(entry.messages, { fromSeq, toSeq }))
            : [];
        }),
      );
    },

    async countMessages(id) {
      return (await read(id))?.messages.length ?? 0;
    },

    async popMessage(id) {
      return change(id, async (key, entry) => {
        const last = entry.messages.at(-1);
        if (!last) return null;
        await files.write(key, entry, [{ type: "pop", seq: last.seq }]);
        return structuredClone(last);
      });
    },

    async truncateAfter(id, seq) {
      return change(id, async (key, entry) => {
        const removed = entry.messages.filter((m) => m.seq > seq).length;
        if (removed > 0) await files.write(key, entry, [{ type: "truncate", afterSeq: seq }]);
        return removed;
      });
    },

    async saveSummary(id: string, input: SummaryInput) {
      return change(id, async (key, entry) => {
        checkSummarySession(id, entry.session, input);
        const summary = {
          id: entry.nextSummaryId,
          fromSeq: input.fromSeq,
          toSeq: input.toSeq,
          content: input.content,
          createdAt: input.createdAt ?? Date.now(),
          ...(input.metadata ? { metadata: input.metadata } : {}),
        };
        await files.write(key, entry, [{ type: "summary", ...summary }]);
        return structuredClone(entry.summaries.find((s) => s.id === summary.id)!);
      });
    },

    async listSummaries(id) {
      return structuredClone((await read(id))?.summaries ?? []);
    },

    async getState(id) {
      const entry = await read(id);
      if (!entry) throw new SessionNotFoundError(String(id));
      return structuredClone(entry.state);
    },

    async setState(id, data, expectedVersion) {
      return change(id, async (key, entry) => {
        if (entry.state.version !== expectedVersion) throw new StateConflictError(expectedVersion, entry.state.version);
        await files.write(key, entry, [{ type: "state", version: expectedVersion + 1, data }]);
        return structuredClone(entry.state);
      });
    },

    async search(query: SearchQuery) {
      await ensureReady();
      checkSearchQuery(query);
      const relevance = query.ranking === "relevance";
      if (query.mode === "fulltext" && !relevance) {
        throw new ThreadkeepError("not_supported", "The file store has no full-text search; use substring");
      }
      const candidates = query.sessionId
        ? [index.sessions.get(keyOf(query.sessionId) ?? "")]
        : [...index.sessions.values()];
      const searched: SessionMessages[] = [];
      for (const session of candidates) {
        if (!session || session.userId !== query.userId || inactiveSince(session, query.activeSince)) continue;
        searched.push({
          sessionId: session.id,
          messages: withinSeqBounds((await read(session.id))?.messages ?? [], query),
        });
      }
      if (relevance) return rankByRelevanceInSlices(searched, query.text, query.limit ?? DEFAULT_SEARCH_LIMIT);
      return rankHits(
        searched.flatMap((s) => substringHits(s.sessionId, [...s.messages], query.text)),
        query.limit,
      );
    },

    async expire(olderThan) {
      await ensureReady();
      const removed: string[] = [];
      for (const [key, candidate] of [...index.sessions]) {
        if (candidate.lastActivityAt >= olderThan) continue;
        // Re-checked in the session's turn: a write queued meanwhile may have made it active again.
        const id = await files.turn(key, async () => {
          const session = index.sessions.get(key);
          if (!session || session.lastActivityAt >= olderThan) return null;
          await remove(key);
          return session.id;
        });
        if (id) removed.push(id);
      }
      return removed;
    },

    async acquireLease(id, leaseOptions) {
      await ensureReady();
      return leases.acquire(keyOf(id) ?? String(id), leaseOptions);
    },

    async close() {
      await memories.idle();
      await files.close(opening);
      leases.clear();
    },
  };
  return store;
}
