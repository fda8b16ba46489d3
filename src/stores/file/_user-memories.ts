/**
 * The file store's memories about users: one JSONL file per user, `<dir>/memories/<hash>.jsonl`, a
 * memory (with its history) per line. Every change rewrites the user's file at once (memories are few
 * and short), so a deleted memory or an erased user leaves no old line behind on disk. A memory's
 * embedding rides in its line (`embedding`: model, the text it was made from, float32 base64), so it
 * goes with the memory; a changed text drops it.
 */
import { createHash } from "node:crypto";
import { mkdir, readdir, readFile, unlink } from "node:fs/promises";
import { join } from "node:path";
import { ThreadkeepError } from "../../core/errors.js";
import {
  applyMemoryPatch,
  memoryFromInput,
  pageUserIds,
  pageUserMemories,
} from "../../core/user-memories/store-helpers.js";
import type {
  ListOptions,
  UserIdPage,
  UserMemory,
  UserMemoryEmbeddingInput,
  UserMemoryInput,
  UserMemoryPage,
  UserMemoryPatch,
  UserMemoryVectorHit,
  UserMemoryVectorQuery,
} from "../../core/types.js";
import {
  memoryVectorsToKeep,
  missingMemoryVectors,
  packVector,
  scanMemoryVectors,
  type StoredMemoryVector,
  unpackVector,
} from "../_vectors.js";
import { errnoOf, fsError, KeyedSerial, writeAtomically } from "./_io.js";

/** A memory as its line holds it: with its embedding, if it has one. */
type Stored = UserMemory & { embedding?: { model: string; text: string; vector: string } };

/** The memory without what only the file keeps. */
function bare(stored: Stored): UserMemory {
  const { embedding: _embedding, ...memory } = stored;
  return structuredClone(memory);
}

function vectorOf(stored: Stored | undefined): StoredMemoryVector | undefined {
  const e = stored?.embedding;
  return e ? { model: e.model, text: e.text, vector: unpackVector(Buffer.from(e.vector, "base64")) } : undefined;
}

/** The memory calls of the file store over `dir`. */
export class UserMemoryFiles {
  readonly #dir: string;
  readonly #fsync: boolean;
  readonly #warn: (message: string) => void;
  readonly #serial = new KeyedSerial();

  constructor(dir: string, options: { fsync: boolean; warn: (message: string) => void }) {
    this.#dir = join(dir, "memories");
    this.#fsync = options.fsync;
    this.#warn = options.warn;
  }

  /** A user id may hold any character: the file is named by its hash. */
  #path(userId: string): string {
    return join(this.#dir, `${createHash("sha256").update(userId).digest("hex").slice(0, 40)}.jsonl`);
  }

  async #read(userId: string): Promise<Map<string, Stored>> {
    const path = this.#path(userId);
    let text: string;
    try {
      text = await readFile(path, "utf8");
    } catch (error) {
      if (errnoOf(error) === "ENOENT") return new Map();
      throw fsError(error, `read ${path}`);
    }
    const out = new Map<string, Stored>();
    for (const [i, line] of text.split("\n").entries()) {
      if (line.trim() === "") continue;
      try {
        const memory = JSON.parse(line) as Stored;
        // A hash shared by two users (never seen, but cheap to rule out) keeps each to their own.
        if (memory.userId === userId && typeof memory.id === "string") out.set(memory.id, memory);
      } catch {
        this.#warn(`[threadkeep] file store: skipped unreadable line ${i + 1} of ${path}`);
      }
    }
    return out;
  }

  async #write(userId: string, memories: Map<string, Stored>): Promise<void> {
    const path = this.#path(userId);
    try {
      if (memories.size === 0) {
        await unlink(path).catch((error) => {
          if (errnoOf(error) !== "ENOENT") throw error;
        });
        return;
      }
      await mkdir(this.#dir, { recursive: true });
      await writeAtomically(path, [...memories.values()].map((m) => `${JSON.stringify(m)}\n`).join(""), this.#fsync);
    } catch (error) {
      throw fsError(error, `write ${path}`);
    }
  }

  /** Reads, changes and rewrites one user's file, one change at a time per user. */
  #change<T>(userId: string, fn: (memories: Map<string, Stored>) => T): Promise<T> {
    return this.#serial.run(userId, async () => {
      const memories = await this.#read(userId);
      const result = fn(memories);
      await this.#write(userId, memories);
      return result;
    });
  }

  add(input: UserMemoryInput): Promise<UserMemory> {
    return this.#change(input.userId, (memories) => {
      const memory = memoryFromInput(input);
      if (memories.has(memory.id)) throw new ThreadkeepError("invalid_request", `Memory ${memory.id} already exists`);
      memories.set(memory.id, memory);
      return structuredClone(memory);
    });
  }

  /** The users with a memory file: each file names its user in its lines (files are named by a hash). */
  async owners(options?: ListOptions): Promise<UserIdPage> {
    let names: string[];
    try {
      names = await readdir(this.#dir);
    } catch (error) {
      if (errnoOf(error) === "ENOENT") return pageUserIds([], options);
      throw fsError(error, `list ${this.#dir}`);
    }
    const userIds: string[] = [];
    for (const name of names.filter((n) => n.endsWith(".jsonl"))) {
      const text = await readFile(join(this.#dir, name), "utf8").catch((error: unknown) => {
        if (errnoOf(error) === "ENOENT") return "";
        throw fsError(error, `read ${join(this.#dir, name)}`);
      });
      for (const line of text.split("\n")) {
        try {
          const userId = (JSON.parse(line) as Partial<UserMemory>).userId;
          if (typeof userId === "string") {
            userIds.push(userId);
            break;
          }
        } catch {
          // An unreadable line: the next one names the user as well (the reads warn about it).
        }
      }
    }
    return pageUserIds(userIds, options);
  }

  async get(userId: string, id: string): Promise<UserMemory | null> {
    const stored = (await this.#read(userId)).get(id);
    return stored ? bare(stored) : null;
  }

  async list(userId: string, options?: ListOptions): Promise<UserMemoryPage> {
    return pageUserMemories([...(await this.#read(userId)).values()].map(bare), options);
  }

  update(userId: string, id: string, patch: UserMemoryPatch): Promise<UserMemory> {
    return this.#change(userId, (memories) => {
      const memory = memories.get(id);
      if (!memory) throw new ThreadkeepError("not_found", `Memory ${id} not found`);
      const next: Stored = applyMemoryPatch(memory, patch);
      if (next.embedding && next.embedding.text !== next.text) delete next.embedding;
      memories.set(id, next);
      return bare(next);
    });
  }

  putEmbeddings(userId: string, model: string, items: UserMemoryEmbeddingInput[]): Promise<void> {
    return this.#change(userId, (memories) => {
      const keep = memoryVectorsToKeep(model, items, [...memories.values()].map(vectorOf));
      for (const [id, v] of keep) {
        const memory = memories.get(id);
        if (memory && memory.text === v.text)
          memory.embedding = { model, text: v.text, vector: packVector(v.vector).toString("base64") };
      }
    });
  }

  async missingEmbeddings(userId: string, model: string, limit: number): Promise<{ id: string; text: string }[]> {
    const memories = await this.#read(userId);
    return missingMemoryVectors(memories.values(), (id) => vectorOf(memories.get(id)), model, limit);
  }

  async searchVectors(query: UserMemoryVectorQuery): Promise<UserMemoryVectorHit[]> {
    const memories = await this.#read(query.userId);
    return scanMemoryVectors(memories.values(), (id) => vectorOf(memories.get(id)), query);
  }

  delete(userId: string, id: string): Promise<boolean> {
    return this.#change(userId, (memories) => memories.delete(id));
  }

  deleteAll(userId: string): Promise<number> {
    return this.#change(userId, (memories) => {
      const count = memories.size;
      memories.clear();
      return count;
    });
  }

  /** Resolves when the changes under way are written. */
  idle(): Promise<void> {
    return this.#serial.idle();
  }
}
