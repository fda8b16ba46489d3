/**
 * The file store's session index, `<dir>/index.jsonl`: every session's header fields and last activity,
 * so listing and expiry read one file instead of every session file. It is derived data: the session
 * files are the truth, and the index is rebuilt from them when it is missing, torn or stale.
 */
import { mkdir, readFile, rename, stat } from "node:fs/promises";
import { join } from "node:path";
import { isValidSessionId } from "../../core/ids.js";
import type { Session } from "../../core/types.js";
import { appendLines, errnoOf, fsError, writeAtomically } from "./_io.js";
import { copySession } from "../_util.js";

/** Dead index lines tolerated beyond the live count before the index is rewritten. */
const INDEX_SLACK = 1000;

type IndexRecord =
  ({ type: "session" } & Session) | { type: "touch"; id: string; at: number } | { type: "delete"; id: string };

const line = (record: IndexRecord) => `${JSON.stringify(record)}\n`;
const sessionLine = (s: Session) => line({ type: "session", ...s });

const sameButActivity = (a: Session, b: Session) =>
  a.id === b.id &&
  a.userId === b.userId &&
  a.createdAt === b.createdAt &&
  JSON.stringify(a.metadata) === JSON.stringify(b.metadata);

/** Options of {@link SessionIndex}. */
export interface SessionIndexOptions {
  dir: string;
  fsync: boolean;
  warn: (message: string) => void;
}

/**
 * The in-memory map of every session (key: lower-case id) and its write-behind file. Writes are
 * queued and coalesced into one append; a failed write is retried as a full rewrite, with a warning,
 * because the session files already hold the data.
 */
export class SessionIndex {
  readonly sessions = new Map<string, Session>();
  readonly #path: string;
  readonly #options: SessionIndexOptions;
  #lines = 0;
  #pending: string[] = [];
  #rewrite = false;
  #changed = false;
  #failing = false;
  #running: Promise<void> | null = null;

  constructor(options: SessionIndexOptions) {
    this.#options = options;
    this.#path = join(options.dir, "index.jsonl");
  }

  /**
   * Reads the index and reconciles it with the session files present (`files`: key → mtime):
   * entries without a file go, files without an entry or written after the index are loaded.
   * A missing or unreadable index is rebuilt from every file.
   */
  async open(files: Map<string, number>, load: (key: string) => Promise<unknown>): Promise<void> {
    let content: Buffer | null = null;
    let indexTime = 0;
    try {
      content = await readFile(this.#path);
      indexTime = (await stat(this.#path)).mtimeMs;
    } catch (error) {
      if (errnoOf(error) !== "ENOENT") throw fsError(error, `read ${this.#path}`);
    }
    const problem = content ? this.#replay(content) : "missing";
    if (problem) {
      this.sessions.clear();
      if (content) await this.#moveAside(problem);
      if (content || files.size > 0) {
        this.#options.warn(`[threadkeep] file store index ${problem}; rebuilding it from ${files.size} session files`);
      }
      for (const key of files.keys()) await load(key);
      this.#rewrite = true;
    } else {
      for (const key of [...this.sessions.keys()]) {
        if (!files.has(key)) {
          this.sessions.delete(key);
          this.#rewrite = true;
        }
      }
      // `>=`: file times are coarse, and a session written in the index's last tick may be newer.
      for (const [key, mtime] of files) {
        if (this.sessions.has(key) && mtime < indexTime) continue;
        await load(key);
        // Rewritten even when nothing changed, so the index is newer than this file at the next open.
        this.#rewrite = true;
      }
    }
    if (this.#rewrite || this.#pending.length > 0) this.#kick();
    await this.flush();
    this.#changed = false;
  }

  /** Records a session's current header fields and activity (a no-op when nothing changed). */
  sync(session: Session): void {
    const key = session.id.toLowerCase();
    const known = this.sessions.get(key);
    if (known && sameButActivity(known, session)) {
      if (known.lastActivityAt === session.lastActivityAt) return;
      known.lastActivityAt = session.lastActivityAt;
      this.#queue(line({ type: "touch", id: known.id, at: known.lastActivityAt }));
      return;
    }
    const copy = copySession(session);
    this.sessions.set(key, copy);
    this.#queue(sessionLine(copy));
  }

  /** Forgets a deleted session. */
  remove(key: string): void {
    const known = this.sessions.get(key);
    if (!known) return;
    this.sessions.delete(key);
    this.#queue(line({ type: "delete", id: known.id }));
  }

  /** Resolves when every queued write has been attempted. */
  async flush(): Promise<void> {
    while (this.#running) await this.#running;
  }

  /** Writes the index out whole when this process changed it, so the next open trusts it. */
  async close(): Promise<void> {
    if (this.#changed) {
      this.#rewrite = true;
      this.#kick();
    }
    await this.flush();
  }

  #queue(text: string): void {
    this.#pending.push(text);
    this.#lines++;
    this.#changed = true;
    this.#kick();
  }

  #kick(): void {
    this.#running ??= Promise.resolve().then(() => this.#drain());
  }

  async #drain(): Promise<void> {
    try {
      while (this.#pending.length > 0 || this.#rewrite) {
        const rewrite = this.#rewrite || this.#lines > 2 * this.sessions.size + INDEX_SLACK;
        const batch = this.#pending.splice(0);
        this.#rewrite = false;
        try {
          if (rewrite) {
            this.#lines = this.sessions.size;
            await writeAtomically(
              this.#path,
              [...this.sessions.values()].map(sessionLine).join(""),
              this.#options.fsync,
            );
          } else {
            await appendLines(this.#path, batch.join(""), this.#options.fsync);
          }
          this.#failing = false;
        } catch (error) {
          // The session files hold the data; the index is retried whole and rebuilt on open if need be.
          this.#rewrite = true;
          if (!this.#failing) this.#options.warn(`[threadkeep] file store index not written: ${String(error)}`);
          this.#failing = true;
          break;
        }
      }
    } finally {
      this.#running = null;
    }
  }

  /** Loads index lines into the map. @returns what is wrong with the file, or null. */
  #replay(content: Buffer): string | null {
    const text = content.toString("utf8");
    if (text.length > 0 && !text.endsWith("\n")) return "torn at its last line";
    const lines = text.split("\n").filter((l) => l.trim() !== "");
    for (const [i, raw] of lines.entries()) {
      let record: IndexRecord;
      try {
        record = JSON.parse(raw);
      } catch {
        return `corrupt at line ${i + 1}`;
      }
      if (!isValidSessionId(record?.id)) return `corrupt at line ${i + 1}`;
      const key = record.id.toLowerCase();
      if (
        record.type === "session" &&
        typeof record.userId === "string" &&
        Number.isFinite(record.createdAt) &&
        Number.isFinite(record.lastActivityAt)
      ) {
        const { type: _type, ...session } = record;
        this.sessions.set(key, { ...session, metadata: session.metadata ?? {} });
      } else if (record.type === "touch" && this.sessions.has(key) && Number.isFinite(record.at)) {
        this.sessions.get(key)!.lastActivityAt = record.at;
      } else if (record.type === "delete") {
        this.sessions.delete(key);
      } else {
        return `corrupt at line ${i + 1}`;
      }
    }
    this.#lines = lines.length;
    return null;
  }

  async #moveAside(problem: string): Promise<void> {
    const quarantineDir = join(this.#options.dir, "quarantine");
    const target = join(quarantineDir, `index.${Date.now()}.jsonl`);
    try {
      await mkdir(quarantineDir, { recursive: true });
      await rename(this.#path, target);
    } catch (error) {
      throw fsError(error, `move the ${problem} index aside`);
    }
  }
}
