/**
 * The JSONL file store, `file:<dir>`: one human-readable, append-only log per session in
 * `<dir>/sessions/<id>.jsonl`, replayed on load. The format is described in docs/file-store.md.
 * One process owns a directory: leases and the write order are held in process memory.
 */
import { mkdir, readdir, readFile, stat, truncate, unlink, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import {
  InvalidSessionIdError,
  SessionNotFoundError,
  StateConflictError,
  ThreadkeepError,
} from "../core/errors.js";
import { isValidSessionId } from "../core/ids.js";
import { validateMessages } from "../core/messages.js";
import type {
  AppendOptions,
  ListOptions,
  MessageInput,
  SearchHit,
  SearchQuery,
  Session,
  SessionPage,
  SessionStore,
  SummaryInput,
} from "../core/types.js";
import { SessionIndex } from "./_jsonl-index.js";
import {
  appendLines,
  errnoOf,
  fsError,
  isTempFile,
  KeyedSerial,
  LruCache,
  quarantineLines,
  writeAtomically,
} from "./_jsonl-io.js";
import {
  applyRecord,
  compactRecords,
  emptyData,
  encodeRecords,
  headerOf,
  liveRecordCount,
  replaySession,
  type SessionData,
  type SessionRecord,
} from "./_jsonl-records.js";
import { LocalLeases } from "./_lease.js";
import {
  applyMessageQuery,
  checkSearchQuery,
  compareSessionsForListing,
  copySession,
  DEFAULT_LIST_LIMIT,
  DEFAULT_SEARCH_LIMIT,
  decodeCursor,
  encodeCursor,
  isAfterCursor,
  matchesSubstring,
  messageText,
  snippetOf,
  stampMessages,
} from "./_util.js";

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

/** A loaded session and what its file holds. */
interface Entry extends SessionData {
  /** Lines in the file. */
  records: number;
  /** Bytes in the file: where to cut a failed append back to. */
  bytes: number;
}

/**
 * A store of one JSONL file per session. Writes are single appends of complete lines, so a crash can
 * only tear the last line; bad lines found on load are quarantined, never dropped.
 */
export function createFileStore(options: FileStoreOptions): SessionStore {
  const dir = resolve(options.dir);
  const sessionsDir = join(dir, "sessions");
  const fsync = options.fsync ?? false;
  const compactAfter = options.compactAfter ?? 64;
  const warn = options.onWarning ?? ((message: string) => console.warn(message));
  const cache = new LruCache<Entry>(options.cacheSize ?? 256);
  const serial = new KeyedSerial();
  const leases = new LocalLeases();
  const index = new SessionIndex({ dir, fsync, warn });
  let opening: Promise<void> | null = null;
  let closed = false;

  // A path is only ever built from a valid id, so no id can reach outside `sessions/`.
  const keyOf = (id: unknown) => (isValidSessionId(id) ? id.toLowerCase() : null);
  const pathOf = (key: string) => join(sessionsDir, `${key}.jsonl`);

  const ensureReady = async () => {
    if (closed) throw new ThreadkeepError("store_unavailable", "The file store is closed");
    opening ??= open().catch((error) => {
      opening = null;
      throw error;
    });
    await opening;
  };

  async function open(): Promise<void> {
    const files = new Map<string, number>();
    try {
      await mkdir(sessionsDir, { recursive: true });
      for (const name of await readdir(sessionsDir)) {
        if (isTempFile(name)) await unlink(join(sessionsDir, name)).catch(() => {});
        const key = name.endsWith(".jsonl") ? name.slice(0, -6) : "";
        if (keyOf(key) === key) files.set(key, (await stat(pathOf(key))).mtimeMs);
      }
    } catch (error) {
      throw fsError(error, `open ${sessionsDir}`);
    }
    await index.open(files, load);
  }

  async function rewrite(key: string, entry: Entry): Promise<void> {
    const records = compactRecords(entry);
    const text = encodeRecords(records, false);
    try {
      await writeAtomically(pathOf(key), text, fsync);
    } catch (error) {
      throw fsError(error, `rewrite session ${key}`);
    }
    entry.records = records.length;
    entry.bytes = Buffer.byteLength(text);
  }

  /** Reads and replays a session file (callers hold the session's turn in `serial`, or the store is opening). */
  async function load(key: string): Promise<Entry | null> {
    const cached = cache.get(key);
    if (cached) return cached;
    let content: Buffer;
    try {
      content = await readFile(pathOf(key));
    } catch (error) {
      if (errnoOf(error) !== "ENOENT") throw fsError(error, `read session ${key}`);
      index.remove(key);
      return null;
    }
    const replay = replaySession(key, content, index.sessions.get(key));
    if (replay.bad.length > 0) {
      let where: string;
      try {
        where = await quarantineLines(dir, key, `sessions/${key}.jsonl`, replay.bad);
      } catch (error) {
        throw fsError(error, `quarantine bad lines of session ${key}`);
      }
      const shown = replay.bad.slice(0, 3).map((b) => `line ${b.line}: ${b.reason}`);
      warn(
        `[threadkeep] file store: moved ${replay.bad.length} bad line(s) of session ${key} to ${where} (${shown.join("; ")})`,
      );
    }
    if (!replay.data) {
      await unlink(pathOf(key)).catch((error) => {
        if (errnoOf(error) !== "ENOENT") throw fsError(error, `remove unreadable session ${key}`);
      });
      index.remove(key);
      return null;
    }
    const entry: Entry = { ...replay.data, records: replay.records, bytes: content.length };
    if (replay.needsRewrite) await rewrite(key, entry);
    index.sync(entry.session);
    cache.set(key, entry);
    return entry;
  }

  /** Appends records as one write, then applies them; a failed write changes nothing. */
  async function write(key: string, entry: Entry, records: SessionRecord[]): Promise<void> {
    const text = encodeRecords(records);
    try {
      await appendLines(pathOf(key), text, fsync);
    } catch (error) {
      cache.delete(key);
      if (errnoOf(error) === "ENOENT") {
        index.remove(key);
        throw new SessionNotFoundError(entry.session.id, { cause: error });
      }
      // A partial append would glue the next write onto a torn line: cut back; a reload repairs the rest.
      await truncate(pathOf(key), entry.bytes).catch(() => {});
      throw fsError(error, `append to session ${key}`);
    }
    entry.bytes += Buffer.byteLength(text);
    entry.records += records.length;
    for (const record of records) applyRecord(entry, record);
    index.sync(entry.session);
    const live = liveRecordCount(entry);
    if (entry.records - live > Math.max(live, compactAfter)) {
      // The write is done; a failed compaction only leaves a longer log, retried after the next write.
      await rewrite(key, entry).catch((error) =>
        warn(`[threadkeep] file store: ${(error as Error).message}`),
      );
    }
  }

  /** A loaded session, or null; reads from the cache need no turn. */
  async function read(id: unknown): Promise<Entry | null> {
    await ensureReady();
    const key = keyOf(id);
    if (!key || !index.sessions.has(key)) return null;
    return cache.get(key) ?? serial.run(key, () => load(key));
  }

  /** Runs a change to one session in that session's turn. */
  async function change<T>(id: string, task: (key: string, entry: Entry) => Promise<T>): Promise<T> {
    await ensureReady();
    const key = keyOf(id);
    if (!key) throw new SessionNotFoundError(String(id));
    return serial.run(key, async () => {
      const entry = index.sessions.has(key) ? await load(key) : null;
      if (!entry) throw new SessionNotFoundError(id);
      return task(key, entry);
    });
  }

  async function remove(key: string): Promise<void> {
    try {
      await unlink(pathOf(key));
    } catch (error) {
      if (errnoOf(error) !== "ENOENT") throw fsError(error, `delete session ${key}`);
    }
    cache.delete(key);
    index.remove(key);
    leases.forget(key);
  }

  return {
    name: FILE_STORE_NAME,
    capabilities: { persistent: true, fullTextSearch: false, crossProcessLease: false, nativeExpiry: false },

    async createSession(input) {
      await ensureReady();
      const key = keyOf(input.id);
      if (!key)
        throw new InvalidSessionIdError(
          `Invalid session id ${JSON.stringify(String(input.id).slice(0, 100))}`,
        );
      return serial.run(key, async () => {
        const exists = () => new ThreadkeepError("session_exists", `Session ${input.id} already exists`);
        if (index.sessions.has(key)) throw exists();
        const createdAt = input.createdAt ?? Date.now();
        const session: Session = {
          id: input.id,
          userId: input.userId,
          createdAt,
          lastActivityAt: input.lastActivityAt ?? createdAt,
          metadata: structuredClone(input.metadata ?? {}),
        };
        const text = encodeRecords([headerOf(session)]);
        try {
          await writeFile(pathOf(key), text, { encoding: "utf8", flag: "wx" });
        } catch (error) {
          if (errnoOf(error) === "EEXIST") throw exists();
          throw fsError(error, `create session ${key}`);
        }
        cache.set(key, { ...emptyData(session), records: 1, bytes: Buffer.byteLength(text) });
        index.sync(session);
        return copySession(session);
      });
    },

    async getSession(id) {
      await ensureReady();
      const session = index.sessions.get(keyOf(id) ?? "");
      return session ? copySession(session) : null;
    },

    async listSessions(userId: string, listOptions: ListOptions = {}): Promise<SessionPage> {
      await ensureReady();
      const limit = listOptions.limit ?? DEFAULT_LIST_LIMIT;
      const cursor = listOptions.cursor ? decodeCursor(listOptions.cursor) : null;
      const owned = [...index.sessions.values()]
        .filter((s) => s.userId === userId && (!cursor || isAfterCursor(s, cursor)))
        .sort(compareSessionsForListing);
      const page = owned.slice(0, limit).map(copySession);
      const last = page.at(-1);
      return { sessions: page, nextCursor: owned.length > limit && last ? encodeCursor(last) : null };
    },

    async listAllSessions(listOptions: ListOptions = {}): Promise<SessionPage> {
      await ensureReady();
      const limit = listOptions.limit ?? DEFAULT_LIST_LIMIT;
      const after = listOptions.cursor ?? "";
      const all = [...index.sessions.values()]
        .filter((s) => s.id > after)
        .sort((a, b) => (a.id < b.id ? -1 : 1));
      const page = all.slice(0, limit).map(copySession);
      return { sessions: page, nextCursor: all.length > limit ? page[page.length - 1].id : null };
    },

    async deleteSession(id) {
      await ensureReady();
      const key = keyOf(id);
      if (!key) return false;
      return serial.run(key, async () => {
        if (!index.sessions.has(key)) return false;
        await remove(key);
        return true;
      });
    },

    async touchSession(id, at = Date.now()) {
      await change(id, (key, entry) => write(key, entry, [{ type: "touch", at }]));
    },

    async updateSessionMetadata(id, metadata) {
      return change(id, async (key, entry) => {
        await write(key, entry, [{ type: "meta", metadata: structuredClone(metadata) }]);
        return copySession(entry.session);
      });
    },

    async appendMessages(id: string, inputs: MessageInput[], appendOptions: AppendOptions = {}) {
      const valid = validateMessages(inputs);
      return change(id, async (key, entry) => {
        leases.check(key, appendOptions.fence);
        const now = Date.now();
        const added = stampMessages(valid, (entry.messages.at(-1)?.seq ?? 0) + 1, now);
        const records: SessionRecord[] = added.map((message) => ({ type: "message", message }));
        const cap = appendOptions.maxMessages ?? 0;
        const all = [...entry.messages, ...added];
        if (cap > 0 && all.length > cap) records.push({ type: "trim", beforeSeq: all[all.length - cap].seq });
        // An empty batch still counts as activity, as in every other store.
        if (records.length === 0) records.push({ type: "touch", at: now });
        await write(key, entry, records);
        return structuredClone(added);
      });
    },

    async getMessages(id, query) {
      const entry = await read(id);
      return entry ? structuredClone(applyMessageQuery(entry.messages, query)) : [];
    },

    async countMessages(id) {
      return (await read(id))?.messages.length ?? 0;
    },

    async popMessage(id) {
      return change(id, async (key, entry) => {
        const last = entry.messages.at(-1);
        if (!last) return null;
        await write(key, entry, [{ type: "pop", seq: last.seq }]);
        return structuredClone(last);
      });
    },

    async truncateAfter(id, seq) {
      return change(id, async (key, entry) => {
        const removed = entry.messages.filter((m) => m.seq > seq).length;
        if (removed > 0) await write(key, entry, [{ type: "truncate", afterSeq: seq }]);
        return removed;
      });
    },

    async saveSummary(id: string, input: SummaryInput) {
      return change(id, async (key, entry) => {
        const summary = {
          id: entry.nextSummaryId,
          fromSeq: input.fromSeq,
          toSeq: input.toSeq,
          content: input.content,
          createdAt: input.createdAt ?? Date.now(),
          ...(input.metadata ? { metadata: structuredClone(input.metadata) } : {}),
        };
        await write(key, entry, [{ type: "summary", ...summary }]);
        return structuredClone(summary);
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
        if (entry.state.version !== expectedVersion)
          throw new StateConflictError(expectedVersion, entry.state.version);
        await write(key, entry, [
          { type: "state", version: expectedVersion + 1, data: structuredClone(data) },
        ]);
        return structuredClone(entry.state);
      });
    },

    async search(query: SearchQuery) {
      await ensureReady();
      checkSearchQuery(query);
      if (query.mode === "fulltext") {
        throw new ThreadkeepError("not_supported", "The file store has no full-text search; use substring");
      }
      const limit = query.limit ?? DEFAULT_SEARCH_LIMIT;
      const hits: SearchHit[] = [];
      const candidates = query.sessionId
        ? [index.sessions.get(keyOf(query.sessionId) ?? "")]
        : [...index.sessions.values()];
      for (const session of candidates) {
        if (!session || session.userId !== query.userId) continue;
        for (const message of (await read(session.id))?.messages ?? []) {
          if (!matchesSubstring(message, query.text)) continue;
          const snippet = snippetOf(messageText(message), query.text);
          hits.push({ sessionId: session.id, seq: message.seq, snippet, message: structuredClone(message) });
        }
      }
      hits.sort((a, b) => b.message.createdAt - a.message.createdAt || b.seq - a.seq);
      return hits.slice(0, limit);
    },

    async expire(olderThan) {
      await ensureReady();
      const removed: string[] = [];
      for (const [key, candidate] of [...index.sessions]) {
        if (candidate.lastActivityAt >= olderThan) continue;
        // Re-checked in the session's turn: a write queued meanwhile may have made it active again.
        const id = await serial.run(key, async () => {
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
      if (closed) return;
      closed = true;
      await serial.idle();
      if (opening) await opening.then(() => index.close()).catch(() => {});
      leases.clear();
      cache.clear();
    },
  };
}
