/**
 * The session files of the file store: finding them, loading (replay and quarantine), appending,
 * compacting and removing, each session's writes one at a time, and a bounded cache of loaded ones.
 */
import { mkdir, readdir, readFile, stat, truncate, unlink } from "node:fs/promises";
import { join } from "node:path";
import { SessionNotFoundError, ThreadkeepError } from "../../core/errors.js";
import { isValidSessionId } from "../../core/ids.js";
import type { Session } from "../../core/types.js";
import { SessionIndex } from "./_session-index.js";
import {
  appendLines,
  createFile,
  errnoOf,
  fsError,
  isTempFile,
  KeyedSerial,
  LruCache,
  quarantineLines,
  writeAtomically,
} from "./_io.js";
import { applyRecord, recordProblem } from "./_apply.js";
import {
  compactRecords,
  emptyData,
  encodeLines,
  type HeaderRecord,
  headerOf,
  liveRecordCount,
  type SessionData,
  type SessionRecord,
} from "./_records.js";
import { replaySession } from "./_replay.js";

/** A loaded session and what its file holds. */
export interface Entry extends SessionData {
  /** Lines in the file. */
  records: number;
  /** Bytes in the file: where to cut a failed append back to. */
  bytes: number;
}

/** Options of {@link SessionFiles} (resolved from the store's options). */
export interface SessionFilesOptions {
  dir: string;
  fsync: boolean;
  cacheSize: number;
  compactAfter: number;
  warn: (message: string) => void;
}

/**
 * Encodes records and reads them back, so the cache holds exactly what a reload would (a Date becomes
 * a string, NaN null) and a record that could not be replayed is refused before it is written.
 * @throws `invalid_request` naming what is wrong.
 */
function prepare(input: SessionRecord[], grouped = true): { text: string; records: SessionRecord[] } {
  const lines = encodeLines(input, grouped);
  const records = lines.map((line) => JSON.parse(line) as SessionRecord);
  for (const record of records) {
    const problem = recordProblem(record);
    if (problem) throw new ThreadkeepError("invalid_request", `Cannot store this ${record.type}: ${problem}`);
  }
  return { text: lines.join(""), records };
}

/** The key of a session id: its lower-case form, or null when it is not a valid id (and so never a path). */
export const keyOf = (id: unknown): string | null => (isValidSessionId(id) ? id.toLowerCase() : null);

/**
 * One process's access to `<dir>/sessions/`. Every load and write of a session runs in that session's
 * turn, so a reader never replays a half-written append and 100 concurrent appends get their seqs in order.
 */
export class SessionFiles {
  readonly index: SessionIndex;
  readonly #options: SessionFilesOptions;
  readonly #sessionsDir: string;
  readonly #cache: LruCache<Entry>;
  readonly #serial = new KeyedSerial();
  #closed = false;

  constructor(options: SessionFilesOptions) {
    this.#options = options;
    this.#sessionsDir = join(options.dir, "sessions");
    this.#cache = new LruCache(options.cacheSize);
    this.index = new SessionIndex(options);
  }

  /** @throws `store_unavailable` once closed. */
  ensureOpen(): void {
    if (this.#closed) throw new ThreadkeepError("store_unavailable", "The file store is closed");
  }

  /** Finds the session files, clears temp files a crash left, and opens (or rebuilds) the index. */
  async open(): Promise<void> {
    const files = new Map<string, number>();
    try {
      await mkdir(this.#sessionsDir, { recursive: true });
      const names = await readdir(this.#sessionsDir);
      for (const name of names.filter(isTempFile)) await unlink(join(this.#sessionsDir, name)).catch(() => {});
      const keys = names.map((n) => (n.endsWith(".jsonl") ? n.slice(0, -6) : "")).filter((k) => keyOf(k) === k);
      const times = await Promise.all(keys.map(async (key) => (await stat(this.#path(key))).mtimeMs));
      for (const [i, key] of keys.entries()) files.set(key, times[i]);
    } catch (error) {
      throw fsError(error, `open ${this.#sessionsDir}`);
    }
    await this.index.open(files, (key) => this.load(key));
  }

  /** Runs `task` in the session's turn (after every earlier task of that session). */
  turn<T>(key: string, task: () => Promise<T>): Promise<T> {
    return this.#serial.run(key, async () => {
      this.ensureOpen();
      return task();
    });
  }

  /** A session known to the index, from the cache or loaded in its turn; null when there is none. */
  async read(key: string): Promise<Entry | null> {
    if (!this.index.sessions.has(key)) return null;
    return this.#cache.get(key) ?? this.turn(key, () => this.load(key));
  }

  /** The loaded session, in its turn. @throws `session_not_found`. */
  async need(key: string, id: string): Promise<Entry> {
    const entry = this.index.sessions.has(key) ? await this.load(key) : null;
    if (!entry) throw new SessionNotFoundError(id);
    return entry;
  }

  /** Writes a new session file. @returns the session as stored, or null when a file for the key exists. */
  async create(key: string, session: Session): Promise<Session | null> {
    const { text, records } = prepare([headerOf(session)]);
    try {
      await createFile(this.#path(key), text, this.#options.fsync);
    } catch (error) {
      if (errnoOf(error) === "EEXIST") return null;
      throw fsError(error, `create session ${key}`);
    }
    const { id, userId, createdAt, lastActivityAt, metadata } = records[0] as HeaderRecord;
    const stored = { id, userId, createdAt, lastActivityAt, metadata };
    this.#cache.set(key, { ...emptyData(stored), records: 1, bytes: Buffer.byteLength(text) });
    this.index.sync(stored);
    return stored;
  }

  /** Reads and replays a session file; call it in the session's turn (or while opening). */
  async load(key: string): Promise<Entry | null> {
    const cached = this.#cache.get(key);
    if (cached) return cached;
    let content: Buffer;
    try {
      content = await readFile(this.#path(key));
    } catch (error) {
      if (errnoOf(error) !== "ENOENT") throw fsError(error, `read session ${key}`);
      this.index.remove(key);
      return null;
    }
    const replay = replaySession(key, content, this.index.sessions.get(key));
    if (replay.bad.length > 0) {
      let where: string;
      try {
        where = await quarantineLines(this.#options.dir, key, `sessions/${key}.jsonl`, replay.bad, this.#options.fsync);
      } catch (error) {
        throw fsError(error, `quarantine bad lines of session ${key}`);
      }
      const shown = replay.bad.slice(0, 3).map((b) => `line ${b.line}: ${b.reason}`);
      this.#options.warn(
        `[threadkeep] file store: moved ${replay.bad.length} bad line(s) of session ${key} to ${where} (${shown.join("; ")})`,
      );
    }
    if (!replay.data) {
      // Every line went to quarantine above; an empty or headless file has nothing left to serve.
      await this.#unlink(key);
      this.index.remove(key);
      return null;
    }
    const entry: Entry = { ...replay.data, records: replay.records, bytes: content.length };
    if (replay.needsRewrite) await this.#rewrite(key, entry);
    this.index.sync(entry.session);
    this.#cache.set(key, entry);
    return entry;
  }

  /**
   * Appends records as one write, then applies them as they will read back; a failed write changes
   * nothing. Call it in the turn.
   * @returns the records as stored (JSON round-tripped).
   */
  async write(key: string, entry: Entry, input: SessionRecord[]): Promise<SessionRecord[]> {
    const { text, records } = prepare(input);
    try {
      await appendLines(this.#path(key), text, this.#options.fsync);
    } catch (error) {
      this.#cache.delete(key);
      if (errnoOf(error) === "ENOENT") {
        this.index.remove(key);
        throw new SessionNotFoundError(entry.session.id, { cause: error });
      }
      // A partial append would glue the next write onto a torn line: cut back; a reload repairs the rest.
      await truncate(this.#path(key), entry.bytes).catch(() => {});
      throw fsError(error, `append to session ${key}`);
    }
    entry.bytes += Buffer.byteLength(text);
    entry.records += records.length;
    for (const record of records) applyRecord(entry, record);
    this.index.sync(entry.session);
    const live = liveRecordCount(entry);
    if (entry.records - live > Math.max(live, this.#options.compactAfter)) {
      // The write is done; a failed compaction only leaves a longer log, retried after the next write.
      await this.#rewrite(key, entry).catch((error) =>
        this.#options.warn(`[threadkeep] file store: ${(error as Error).message}`),
      );
    }
    return records;
  }

  /** Deletes a session's file; call it in the turn. */
  async remove(key: string): Promise<void> {
    await this.#unlink(key);
    this.#cache.delete(key);
    this.index.remove(key);
  }

  /**
   * Refuses new work, waits for queued work, then writes the index out if `opening` (the store's open)
   * succeeded. Idempotent.
   */
  async close(opening: Promise<void> | null): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#serial.idle();
    if (
      opening &&
      (await opening.then(
        () => true,
        () => false,
      ))
    )
      await this.index.close();
    this.#cache.clear();
  }

  #path(key: string): string {
    return join(this.#sessionsDir, `${key}.jsonl`);
  }

  async #unlink(key: string): Promise<void> {
    try {
      await unlink(this.#path(key));
    } catch (error) {
      if (errnoOf(error) !== "ENOENT") throw fsError(error, `delete session ${key}`);
    }
  }

  async #rewrite(key: string, entry: Entry): Promise<void> {
    const records = compactRecords(entry);
    const text = encodeLines(records, false).join("");
    try {
      await writeAtomically(this.#path(key), text, this.#options.fsync);
    } catch (error) {
      throw fsError(error, `rewrite session ${key}`);
    }
    entry.records = records.length;
    entry.bytes = Buffer.byteLength(text);
  }
}
