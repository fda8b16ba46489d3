/**
 * Filesystem plumbing of the file store: coded errors, appends and atomic rewrites, the quarantine,
 * and the in-process serialisation and cache that keep one process's view of a file consistent.
 */
import { randomBytes } from "node:crypto";
import { constants } from "node:fs";
import { mkdir, open, rename, unlink } from "node:fs/promises";
import { dirname, join } from "node:path";
import { isThreadkeepError, StoreUnavailableError } from "../../core/errors.js";
import type { BadLine } from "./_records.js";

/** The `code` of a Node filesystem error (`ENOENT`, `EACCES`, …), if it has one. */
export function errnoOf(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" ? code : undefined;
}

/** Errnos of a write the disk had no room for: full, past the process's file-size limit, past a quota. */
const NO_SPACE = new Set(["ENOSPC", "EFBIG", "EDQUOT"]);

/**
 * Turns a filesystem failure into `store_unavailable` with the cause (flagged `storageFull` when the
 * disk had no room: see `isStorageFull`); coded errors pass through.
 */
export function fsError(error: unknown, what: string): Error {
  if (isThreadkeepError(error)) return error;
  const code = errnoOf(error);
  return new StoreUnavailableError(`File store cannot ${what}${code ? ` (${code})` : ""}`, {
    cause: error,
    ...(code && NO_SPACE.has(code) ? { details: { storageFull: true, errno: code } } : {}),
  });
}

// No O_CREAT: appending to a file that vanished must fail, not start a headless file.
const APPEND_EXISTING = constants.O_WRONLY | constants.O_APPEND;

async function writeWith(path: string, flags: string | number, text: string, fsync: boolean): Promise<void> {
  const handle = await open(path, flags);
  try {
    await handle.writeFile(text, "utf8");
    if (fsync) await handle.datasync();
  } finally {
    await handle.close();
  }
}

// A new or renamed file is durable only once its directory entry is; Windows cannot open a directory.
async function syncDirectoryOf(path: string): Promise<void> {
  if (process.platform === "win32") return;
  const handle = await open(dirname(path), "r");
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/**
 * Appends complete lines to an existing file; with `fsync` they are on disk before this resolves.
 * @throws ENOENT when the file does not exist.
 */
export function appendLines(path: string, text: string, fsync: boolean): Promise<void> {
  return writeWith(path, APPEND_EXISTING, text, fsync);
}

/** Creates a file that must not exist yet. @throws EEXIST when it does. */
export async function createFile(path: string, text: string, fsync: boolean): Promise<void> {
  await writeWith(path, "wx", text, fsync);
  if (fsync) await syncDirectoryOf(path);
}

/** Replaces a file's content all at once: a reader (or a crash) sees the old file or the new, never a mix. */
export async function writeAtomically(path: string, text: string, fsync: boolean): Promise<void> {
  const temp = `${path}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`;
  try {
    await writeWith(temp, "wx", text, fsync);
    await rename(temp, path);
  } catch (error) {
    await unlink(temp).catch(() => {});
    throw error;
  }
  if (fsync) await syncDirectoryOf(path);
}

/** A temp file left by a rewrite that a crash interrupted. */
export const isTempFile = (name: string) => name.endsWith(".tmp");

/**
 * Moves bad lines aside into `<dir>/quarantine/<name>.<timestamp>.jsonl`, one JSON object per line
 * with the source file, line number, reason and the original text.
 * @returns the quarantine file's path.
 */
export async function quarantineLines(
  dir: string,
  name: string,
  source: string,
  bad: BadLine[],
  fsync: boolean,
): Promise<string> {
  const quarantineDir = join(dir, "quarantine");
  const path = join(quarantineDir, `${name}.${Date.now()}.jsonl`);
  const text = bad.map((b) => `${JSON.stringify({ file: source, ...b })}\n`).join("");
  await mkdir(quarantineDir, { recursive: true });
  await writeWith(path, "a", text, fsync);
  return path;
}

/** Runs tasks one at a time per key, in call order; different keys run concurrently. */
export class KeyedSerial {
  #tails = new Map<string, Promise<unknown>>();

  run<T>(key: string, task: () => Promise<T>): Promise<T> {
    const result = (this.#tails.get(key) ?? Promise.resolve()).then(task);
    const tail = result.catch(() => {});
    this.#tails.set(key, tail);
    void tail.then(() => {
      if (this.#tails.get(key) === tail) this.#tails.delete(key);
    });
    return result;
  }

  /** Resolves when every task queued so far has settled. */
  async idle(): Promise<void> {
    while (this.#tails.size > 0) await Promise.all(this.#tails.values());
  }
}

/** A map that keeps the `limit` most recently used entries. */
export class LruCache<V> {
  #map = new Map<string, V>();
  readonly #limit: number;

  constructor(limit: number) {
    this.#limit = Math.max(0, limit);
  }

  get(key: string): V | undefined {
    const value = this.#map.get(key);
    if (value !== undefined) {
      this.#map.delete(key);
      this.#map.set(key, value);
    }
    return value;
  }

  set(key: string, value: V): void {
    this.#map.delete(key);
    this.#map.set(key, value);
    while (this.#map.size > this.#limit) this.#map.delete(this.#map.keys().next().value as string);
  }

  delete(key: string): void {
    this.#map.delete(key);
  }

  clear(): void {
    this.#map.clear();
  }
}
