/**
 * The memories API of a {@link Memory} (`memory.memories`): short statements about a user that outlive
 * the session they were said in, written by hand or by the model, each with its history. Every call is
 * one user's (`userId`, else the default user): another user's memory reads as missing.
 */
import type { BackgroundEmbedder } from "../embeddings.js";
import { ThreadkeepError } from "../errors.js";
import { reciprocalRankFusion } from "../search.js";
import { checkJson } from "../json-limits.js";
import { relevanceTerms } from "../store/relevance.js";
import { memoryPageLimit } from "./store-helpers.js";
import { memoryWritten } from "./presence.js";
import type { FullStore, ListOptions, UserMemory, UserMemoryPage, UserMemorySource } from "../types.js";
import type { OwnerOptions } from "../memory/memory-options.js";

/** Longest memory text, in characters (after trimming): a memory is a short statement, not a document. */
export const MAX_MEMORY_TEXT_LENGTH = 2_000;
/** Largest memory metadata, in characters of its JSON. */
export const MAX_MEMORY_METADATA_LENGTH = 16_384;
/** Longest memory id accepted (ids made by threadkeep are UUIDs). */
export const MAX_MEMORY_ID_LENGTH = 128;
/** Most memories of one user a ranked listing (`q`) or {@link UserMemories.all} reads. */
export const MAX_MEMORIES_READ = 10_000;

/** What {@link UserMemories.add} takes. */
export interface UserMemoryAdd {
  /** The statement, 1 to {@link MAX_MEMORY_TEXT_LENGTH} characters (trimmed). */
  text: string;
  metadata?: Record<string, unknown>;
  /** Where it came from. @default { kind: "hand" } */
  source?: UserMemorySource;
  /** A UUID is made when left out. */
  id?: string;
}

/** What {@link UserMemories.update} changes. */
export interface UserMemoryEdit {
  /** The new statement; the old one is kept in the memory's history. */
  text?: string;
  /** Merged into the stored metadata. */
  metadata?: Record<string, unknown>;
  /** Why it changed, kept with the old text. @default "edit" */
  reason?: string;
}

/** Options of {@link UserMemories.list}. */
export interface UserMemoryListOptions extends OwnerOptions, ListOptions {
  /**
   * Ranks the user's memories by relevance to this text instead of newest first; only related ones are
   * listed: sharing words with it (lexical), or, with an embedder, also close to it in meaning (hybrid).
   */
  q?: string;
}

const invalid = (message: string) => new ThreadkeepError("invalid_request", message);

/** The trimmed text of a memory. @throws `invalid_request`. */
export function checkMemoryText(text: unknown): string {
  if (typeof text !== "string") throw invalid("text must be a string");
  const trimmed = text.trim();
  if (trimmed === "") throw invalid("text must not be empty");
  if (trimmed.length > MAX_MEMORY_TEXT_LENGTH)
    throw invalid(`text must be at most ${MAX_MEMORY_TEXT_LENGTH} characters, got ${trimmed.length}`);
  return trimmed;
}

/** Checks memory metadata: a JSON object of bounded depth and size. @throws `invalid_request`. */
export function checkMemoryMetadata(metadata: unknown): Record<string, unknown> {
  if (typeof metadata !== "object" || metadata === null || Array.isArray(metadata))
    throw invalid("metadata must be an object");
  checkJson(metadata, "metadata");
  const length = JSON.stringify(metadata).length;
  if (length > MAX_MEMORY_METADATA_LENGTH)
    throw invalid(`metadata must be at most ${MAX_MEMORY_METADATA_LENGTH} characters of JSON, got ${length}`);
  return metadata as Record<string, unknown>;
}

function checkSource(source: unknown): UserMemorySource {
  const s = source as Partial<Record<string, unknown>> | null;
  if (s && s.kind === "hand") return { kind: "hand" };
  if (
    s &&
    s.kind === "session" &&
    typeof s.sessionId === "string" &&
    s.sessionId.length > 0 &&
    s.sessionId.length <= 256 &&
    Array.isArray(s.seqs) &&
    s.seqs.length <= 1_000 &&
    s.seqs.every((q) => Number.isSafeInteger(q) && (q as number) > 0)
  ) {
    return { kind: "session", sessionId: s.sessionId, seqs: [...(s.seqs as number[])] };
  }
  throw invalid('source must be { kind: "hand" } or { kind: "session", sessionId, seqs }');
}

/** True when `id` could name a memory (anything else is simply not found). */
export function isMemoryId(id: unknown): id is string {
  return typeof id === "string" && id.length > 0 && id.length <= MAX_MEMORY_ID_LENGTH;
}

/**
 * The words of a text for lexical ranking, as sessions' search ranks messages: lower-case letters and
 * digits, English stopwords dropped ("who is my manager" matches on "manager" alone), Porter-stemmed.
 */
export function memoryTerms(text: string): string[] {
  return relevanceTerms(text.normalize("NFKC"));
}

/**
 * Ranks memories by relevance to `query`, best first, leaving out those that share no word with it:
 * BM25 over the given memories (rare words weigh more, short memories a little more), ties newest first.
 */
export function rankMemories<M extends Pick<UserMemory, "text" | "updatedAt" | "id">>(
  memories: M[],
  query: string,
): { memory: M; score: number }[] {
  const wanted = [...new Set(memoryTerms(query))];
  if (wanted.length === 0) return [];
  const docs = memories.map((memory) => ({ memory, terms: memoryTerms(memory.text) }));
  const avg = docs.reduce((n, d) => n + d.terms.length, 0) / Math.max(1, docs.length) || 1;
  const idf = new Map(
    wanted.map((w) => {
      const df = docs.filter((d) => d.terms.includes(w)).length;
      return [w, Math.log(1 + (docs.length - df + 0.5) / (df + 0.5))];
    }),
  );
  const k1 = 1.2;
  const b = 0.75;
  const ranked: { memory: M; score: number }[] = [];
  for (const { memory, terms } of docs) {
    let score = 0;
    for (const w of wanted) {
      const tf = terms.filter((t) => t === w).length;
      if (tf > 0) score += idf.get(w)! * ((tf * (k1 + 1)) / (tf + k1 * (1 - b + (b * terms.length) / avg)));
    }
    if (score > 0) ranked.push({ memory, score });
  }
  return ranked.sort(
    (x, y) => y.score - x.score || y.memory.updatedAt - x.memory.updatedAt || (x.memory.id < y.memory.id ? 1 : -1),
  );
}

function encodeOffset(offset: number): string {
  return Buffer.from(`q:${offset}`).toString("base64url");
}

function decodeOffset(cursor: string): number {
  const text = Buffer.from(cursor, "base64url").toString();
  const offset = Number(text.slice(2));
  if (!text.startsWith("q:") || !Number.isSafeInteger(offset) || offset < 0) throw invalid("Invalid cursor");
  return offset;
}

/** What {@link UserMemories} is built from: the Memory's store, its owner rule, and its view of sessions. */
export interface UserMemoriesInit {
  store: Promise<FullStore>;
  owner: (options?: OwnerOptions) => string;
  /** True when the user's session exists (and has not expired): a memory drawn from it links there. */
  sessionLive: (sessionId: string, userId: string) => Promise<boolean>;
  /** Ranking by meaning, with an embedder. */
  semantics?: MemorySemantics;
}

/** Memories the vector side of a hybrid ranking reads: more than a page, so fusion has something to weigh. */
const SEMANTIC_DEPTH = 50;

/** How memories are ranked by meaning: the embedder, and the least cosine similarity that counts as related. */
export interface MemorySemantics {
  vectors: BackgroundEmbedder;
  minScore: number;
}

/**
 * Ranks memories for `query`, best first: by words ({@link rankMemories}) and, with `closeness` (cosine
 * similarity by id, only the related ones), fused with the order by meaning (reciprocal-rank fusion, as
 * hybrid search fuses messages). A memory related either way is kept.
 */
export function rankMemoriesHybrid<M extends Pick<UserMemory, "text" | "updatedAt" | "id">>(
  memories: M[],
  query: string,
  closeness?: ReadonlyMap<string, number>,
): { memory: M; score: number }[] {
  const lexical = rankMemories(memories, query);
  if (!closeness || closeness.size === 0) return lexical;
  const close = memories
    .filter((m) => closeness.has(m.id))
    .sort((a, b) => closeness.get(b.id)! - closeness.get(a.id)! || (a.id < b.id ? -1 : 1));
  return reciprocalRankFusion([lexical.map((r) => r.memory), close], (m) => m.id)
    .map(({ item, score }) => ({ memory: item, score }))
    .sort(
      (x, y) => y.score - x.score || y.memory.updatedAt - x.memory.updatedAt || (x.memory.id < y.memory.id ? 1 : -1),
    );
}

/** `memory.memories`: one user's memories (see the file's comment). */
export class UserMemories {
  readonly #store: Promise<FullStore>;
  readonly #owner: (options?: OwnerOptions) => string;
  readonly #sessionLive: UserMemoriesInit["sessionLive"];
  readonly #semantics?: MemorySemantics;

  constructor(init: UserMemoriesInit) {
    this.#store = init.store;
    this.#owner = init.owner;
    this.#sessionLive = init.sessionLive;
    this.#semantics = init.semantics;
  }

  /** Embeds the user's new or changed memories in the background (with an embedder and a store that keeps their vectors). */
  #written(store: FullStore, userId: string): void {
    this.#semantics?.vectors.scheduleUserMemories(store, userId);
  }

  /**
   * Embeds, in the background, the user's memories without a vector of their current text (nothing
   * without an embedder, or with a store that keeps no memory vectors). The writes of this API do it
   * themselves; call it after writing memories to the store directly. `memory.idle()` waits for it.
   */
  async scheduleEmbedding(options: OwnerOptions = {}): Promise<void> {
    if (this.#semantics) this.#written(await this.#store, this.#owner(options));
  }

  /**
   * Says of each memory drawn from a session whether that session is gone (`source.sessionDeleted`):
   * the memory keeps its text, and a reader must not offer a link to a transcript that is no more.
   * One session read per distinct session, in parallel; the stores keep no such flag, since a
   * session also goes by expiry, which writes nothing.
   */
  async #withSources<M extends UserMemory>(userId: string, memories: M[]): Promise<M[]> {
    const ids = [...new Set(memories.flatMap((m) => (m.source.kind === "session" ? [m.source.sessionId] : [])))];
    if (ids.length === 0) return memories;
    const live = new Map(await Promise.all(ids.map(async (id) => [id, await this.#sessionLive(id, userId)] as const)));
    // New objects: a custom store may hand out what it holds.
    return memories.map((m) =>
      m.source.kind === "session"
        ? { ...m, source: { ...m.source, sessionDeleted: !live.get(m.source.sessionId) } }
        : m,
    );
  }

  /** Stores a new memory (by hand unless `source` says otherwise). @throws `invalid_request`. */
  async add(input: UserMemoryAdd, options: OwnerOptions = {}): Promise<UserMemory> {
    if (typeof input !== "object" || input === null) throw invalid("A memory must be an object with text");
    const text = checkMemoryText(input.text);
    const metadata = input.metadata === undefined ? undefined : checkMemoryMetadata(input.metadata);
    const source = input.source === undefined ? undefined : checkSource(input.source);
    if (input.id !== undefined && !isMemoryId(input.id))
      throw invalid(`id must be a string of 1 to ${MAX_MEMORY_ID_LENGTH} characters`);
    const store = await this.#store;
    const userId = this.#owner(options);
    const added = await store.addUserMemory({ userId, text, metadata, source, id: input.id });
    memoryWritten(store, userId);
    this.#written(store, userId);
    return (await this.#withSources(userId, [added]))[0];
  }

  /** The user's memory, or null (also for another user's id). */
  async get(id: string, options: OwnerOptions = {}): Promise<UserMemory | null> {
    if (!isMemoryId(id)) return null;
    const userId = this.#owner(options);
    const found = await (await this.#store).getUserMemory(userId, id);
    return found && (await this.#withSources(userId, [found]))[0];
  }

  /**
   * The user's memories, most recently updated first; with `q`, those related to it, most relevant
   * first (over up to {@link MAX_MEMORIES_READ} of them): lexical, or hybrid with an embedder (see
   * {@link rankMemoriesHybrid}). An embedder that fails leaves the lexical ranking (logged).
   */
  async list(options: UserMemoryListOptions = {}): Promise<UserMemoryPage> {
    const userId = this.#owner(options);
    const limit = memoryPageLimit(options);
    if (options.q === undefined) {
      const page = await (await this.#store).listUserMemories(userId, { limit, cursor: options.cursor });
      return { ...page, memories: await this.#withSources(userId, page.memories) };
    }
    if (typeof options.q !== "string" || options.q.length > MAX_MEMORY_TEXT_LENGTH)
      throw invalid(`q must be a string of at most ${MAX_MEMORY_TEXT_LENGTH} characters`);
    const offset = options.cursor ? decodeOffset(options.cursor) : 0;
    const [memories, closeness] = await Promise.all([this.all({ userId }), this.#closeness(userId, options.q)]);
    const ranked = rankMemoriesHybrid(memories, options.q, closeness);
    const page = ranked.slice(offset, offset + limit).map((r) => r.memory);
    return {
      memories: await this.#withSources(userId, page),
      nextCursor: ranked.length > offset + limit ? encodeOffset(offset + limit) : null,
    };
  }

  /** Cosine similarity by id of the user's memories close to `text` in meaning; none without an embedder. */
  async #closeness(userId: string, text: string): Promise<Map<string, number> | undefined> {
    if (!this.#semantics || text.trim() === "") return undefined;
    const { vectors, minScore } = this.#semantics;
    try {
      const hits = await vectors.searchUserMemories(await this.#store, {
        userId,
        text,
        limit: SEMANTIC_DEPTH,
        minScore,
      });
      return new Map(hits.map((h) => [h.id, h.score]));
    } catch (error) {
      console.warn(
        `[threadkeep] ranking the memories of user ${userId} by meaning failed; ranked by words only: ${error}`,
      );
      return undefined;
    }
  }

  /**
   * Every memory of the user (up to {@link MAX_MEMORIES_READ}), most recently updated first, as
   * stored: their sources are not checked (`sessionDeleted` is left unset).
   */
  async all(options: OwnerOptions = {}): Promise<UserMemory[]> {
    const store = await this.#store;
    const userId = this.#owner(options);
    const out: UserMemory[] = [];
    let cursor: string | null = null;
    do {
      const page: UserMemoryPage = await store.listUserMemories(userId, { limit: 500, cursor });
      out.push(...page.memories);
      cursor = page.nextCursor;
    } while (cursor && out.length < MAX_MEMORIES_READ);
    return out.slice(0, MAX_MEMORIES_READ);
  }

  /**
   * Changes a memory: a new text (the old one kept in its history with `reason`) and/or metadata merged in.
   * @throws `not_found` for a missing or another user's memory; `invalid_request`.
   */
  async update(id: string, edit: UserMemoryEdit, options: OwnerOptions = {}): Promise<UserMemory> {
    if (typeof edit !== "object" || edit === null) throw invalid("An edit must be an object with text or metadata");
    const text = edit.text === undefined ? undefined : checkMemoryText(edit.text);
    const metadata = edit.metadata === undefined ? undefined : checkMemoryMetadata(edit.metadata);
    if (text === undefined && metadata === undefined) throw invalid("An edit needs text or metadata");
    if (edit.reason !== undefined && (typeof edit.reason !== "string" || edit.reason.length > 64))
      throw invalid("reason must be a string of at most 64 characters");
    if (!isMemoryId(id)) throw new ThreadkeepError("not_found", "Memory not found");
    const store = await this.#store;
    const userId = this.#owner(options);
    const updated = await store.updateUserMemory(userId, id, { text, metadata, reason: edit.reason ?? "edit" });
    if (text !== undefined) this.#written(store, userId);
    return (await this.#withSources(userId, [updated]))[0];
  }

  /** Deletes a memory with its history. @returns false when there was none (or it is another user's). */
  async delete(id: string, options: OwnerOptions = {}): Promise<boolean> {
    if (!isMemoryId(id)) return false;
    return (await this.#store).deleteUserMemory(this.#owner(options), id);
  }
}
