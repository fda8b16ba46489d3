/**
 * Message embeddings: after a commit, the new messages of a session are embedded in the background,
 * in batches, and stored beside them; a failure is logged and retried later, never failing the turn.
 * Memories about users likewise: after a memory is written, the user's memories without a vector of
 * their current text are embedded in the background. Also the query side: semantic search embeds the
 * query text and asks the store for its neighbours (a query text embedded lately is not asked again).
 */
import { contentText } from "./messages.js";
import type { RankedHit, VectorSearcher } from "./search.js";
import {
  canStoreMemoryVectors,
  canStoreVectors,
  type FullStore,
  type Message,
  type UserMemoryVectorHit,
  type UserMemoryVectorStore,
  type VectorStore,
} from "./types.js";

/** Query texts whose vectors are kept: the recalls and the memory note of one turn embed the same text. */
const QUERY_CACHE_SIZE = 64;

/** Turns texts into vectors (e.g. `createEmbedder({ baseUrl, model })` over an OpenAI-compatible /v1/embeddings). */
export interface Embedder {
  /** The model name vectors are stored under: a different model re-embeds. */
  readonly model: string;
  embed(texts: string[]): Promise<number[][]>;
}

/** How embedding runs. */
export interface EmbeddingOptions {
  /** Texts per embeddings request. @default 64 */
  batchSize?: number;
  /** First retry delay after a failure (doubling, at most 10 minutes). @default 5000 */
  retryDelayMs?: number;
  /** Longer message texts are cut to this many characters before embedding. @default 8000 */
  maxChars?: number;
}

/** The text of a message that is embedded (empty: nothing worth embedding). */
export function embeddingText(message: Message, maxChars = 8000): string {
  const text = contentText(message.content).trim();
  return text.length > maxChars ? text.slice(0, maxChars) : text;
}

/** Embeds what a session lacks, one session at a time, in the background. */
export class BackgroundEmbedder implements VectorSearcher {
  readonly embedder: Embedder;
  readonly #batchSize: number;
  readonly #maxChars: number;
  readonly #retryDelayMs: number;
  readonly #running = new Map<string, Promise<number>>();
  readonly #again = new Set<string>();
  readonly #retry = new Map<string, { timer: NodeJS.Timeout; delay: number }>();
  readonly #queries = new Map<string, Promise<number[]>>();
  #closed = false;

  constructor(embedder: Embedder, options: EmbeddingOptions = {}) {
    this.embedder = embedder;
    this.#batchSize = Math.max(1, options.batchSize ?? 64);
    this.#maxChars = options.maxChars ?? 8000;
    this.#retryDelayMs = options.retryDelayMs ?? 5000;
  }

  /**
   * Embeds every message of the session that has no vector of the model yet. @returns how many were
   * embedded. @throws what the embedder or store threw (the background path logs and retries instead).
   */
  async embedSession(store: VectorStore, sessionId: string): Promise<number> {
    let done = 0;
    for (;;) {
      const seqs = await store.missingEmbeddings(sessionId, this.embedder.model, this.#batchSize * 4);
      if (seqs.length === 0) return done;
      const messages = (await store.getMessages(sessionId, { fromSeq: seqs[0], toSeq: seqs.at(-1)! })).filter((m) =>
        seqs.includes(m.seq),
      );
      let progressed = false;
      for (let i = 0; i < messages.length; i += this.#batchSize) {
        const batch = messages.slice(i, i + this.#batchSize);
        // Messages without text (a tool call alone) get a zero vector, so they are not asked again.
        const texts = batch.map((m) => embeddingText(m, this.#maxChars));
        const wanted = texts.map((t, k) => [t, k] as const).filter(([t]) => t !== "");
        const vectors = wanted.length > 0 ? await this.embedder.embed(wanted.map(([t]) => t)) : [];
        const dims = vectors[0]?.length ?? 1;
        const byIndex = new Map(wanted.map(([, k], j) => [k, vectors[j]]));
        await store.putEmbeddings(
          sessionId,
          this.embedder.model,
          batch.map((m, k) => ({
            seq: m.seq,
            createdAt: m.createdAt,
            vector: byIndex.get(k) ?? new Array(dims).fill(0),
          })),
        );
        done += batch.length;
        progressed = true;
      }
      if (!progressed) return done;
    }
  }

  /**
   * Embeds every memory of the user that has no vector of the model for its current text. @returns
   * how many were embedded. @throws what the embedder or store threw (the background path retries).
   */
  async embedUserMemories(store: UserMemoryVectorStore, userId: string): Promise<number> {
    let done = 0;
    for (;;) {
      const missing = await store.missingUserMemoryEmbeddings(userId, this.embedder.model, this.#batchSize);
      if (missing.length === 0) return done;
      const vectors = await this.embedder.embed(missing.map((m) => m.text.slice(0, this.#maxChars)));
      await store.putUserMemoryEmbeddings(
        userId,
        this.embedder.model,
        missing.map((m, i) => ({ id: m.id, text: m.text, vector: vectors[i] })),
      );
      done += missing.length;
      // A memory changed while it was embedded is missing again: the next round takes it, and a
      // memory changing faster than that waits for the next write to schedule it.
      if (done > 10 * this.#batchSize) return done;
    }
  }

  /** Schedules a session's embedding after a commit; failures are logged and retried with backoff. */
  schedule(store: FullStore, sessionId: string): void {
    if (!canStoreVectors(store)) return;
    this.#schedule(`session ${sessionId}`, () => this.embedSession(store, sessionId));
  }

  /** Schedules the embedding of a user's memories after one is written; failures are logged and retried with backoff. */
  scheduleUserMemories(store: FullStore, userId: string): void {
    if (!canStoreMemoryVectors(store)) return;
    this.#schedule(`memories of user ${userId}`, () => this.embedUserMemories(store, userId));
  }

  #schedule(key: string, job: () => Promise<number>): void {
    if (this.#closed) return;
    if (this.#running.has(key)) {
      this.#again.add(key);
      return;
    }
    const run = job()
      .then((n) => {
        const pending = this.#retry.get(key);
        if (pending) clearTimeout(pending.timer);
        this.#retry.delete(key);
        return n;
      })
      .catch((error: unknown) => {
        const delay = Math.min(600_000, (this.#retry.get(key)?.delay ?? this.#retryDelayMs / 2) * 2);
        console.warn(`[threadkeep] embedding ${key} failed, retrying in ${delay} ms: ${error}`);
        const timer = setTimeout(() => this.#schedule(key, job), delay);
        timer.unref();
        this.#retry.set(key, { timer, delay });
        return 0;
      })
      .finally(() => {
        this.#running.delete(key);
        if (this.#again.delete(key)) this.#schedule(key, job);
      });
    this.#running.set(key, run);
  }

  /** Resolves when no embedding is running (retries waiting on a timer do not count). */
  async idle(): Promise<void> {
    while (this.#running.size > 0) await Promise.all(this.#running.values());
  }

  /** Stops scheduling and cancels waiting retries. */
  close(): void {
    this.#closed = true;
    for (const { timer } of this.#retry.values()) clearTimeout(timer);
    this.#retry.clear();
  }

  /** Semantic search: the query's embedding against the store's vectors of the model. */
  async search(
    store: FullStore,
    query: {
      userId: string;
      sessionId?: string;
      text: string;
      limit: number;
      beforeSeq?: number;
      afterSeq?: number;
      activeSince?: number;
    },
  ): Promise<RankedHit[]> {
    if (!canStoreVectors(store)) return [];
    const vector = await this.queryVector(query.text);
    return store.searchVectors({ ...query, model: this.embedder.model, vector });
  }

  /**
   * The user's memories closest in meaning to `text`, best first, at least `minScore` similar; empty
   * when the store keeps no memory vectors. Memories not embedded yet (written before a restart, or
   * while the embedder failed) are scheduled, and count from the next call on.
   */
  async searchUserMemories(
    store: FullStore,
    query: { userId: string; text: string; limit: number; minScore: number },
  ): Promise<UserMemoryVectorHit[]> {
    if (!canStoreMemoryVectors(store)) return [];
    const vector = await this.queryVector(query.text);
    const [hits, missing] = await Promise.all([
      store.searchUserMemoryVectors({ userId: query.userId, model: this.embedder.model, vector, limit: query.limit }),
      store.missingUserMemoryEmbeddings(query.userId, this.embedder.model, 1),
    ]);
    if (missing.length > 0) this.scheduleUserMemories(store, query.userId);
    return hits.filter((h) => h.score >= query.minScore);
  }

  /** The embedding of a query text; one asked for lately (or being asked for) is not asked again. */
  queryVector(text: string): Promise<number[]> {
    const cached = this.#queries.get(text);
    if (cached) return cached;
    const asked = this.embedder.embed([text]).then(([vector]) => vector);
    if (this.#queries.size >= QUERY_CACHE_SIZE) this.#queries.delete(this.#queries.keys().next().value!);
    this.#queries.set(text, asked);
    asked.catch(() => this.#queries.delete(text));
    return asked;
  }
}
