/**
 * What every store's vector support shares: packing vectors as little-endian float32, cosine
 * similarity, the dimension check, and an exact top-k scan (bounded by the owner's own messages).
 */
import { ThreadkeepError } from "../core/errors.js";
import type {
  Message,
  UserMemory,
  UserMemoryEmbeddingInput,
  UserMemoryVectorHit,
  UserMemoryVectorQuery,
  VectorHit,
  VectorQuery,
} from "../core/types.js";
import { DEFAULT_SEARCH_LIMIT, messageText } from "./_util.js";

/** Packs a vector as float32 (4 bytes a dimension), the stored form in every backend. */
export function packVector(vector: ArrayLike<number>): Buffer {
  const packed = Buffer.alloc(vector.length * 4);
  for (let i = 0; i < vector.length; i++) packed.writeFloatLE(vector[i], i * 4);
  return packed;
}

/** Reads a packed float32 vector. */
export function unpackVector(packed: Uint8Array): Float32Array {
  const copy = new Uint8Array(packed.byteLength);
  copy.set(packed);
  return new Float32Array(copy.buffer, 0, packed.byteLength >> 2);
}

/** The vector scaled to length 1 (a zero vector stays zero), so cosine similarity is a dot product. */
export function normalize(vector: ArrayLike<number>): Float32Array {
  let norm = 0;
  for (let i = 0; i < vector.length; i++) norm += vector[i] * vector[i];
  const scale = norm > 0 ? 1 / Math.sqrt(norm) : 0;
  const out = new Float32Array(vector.length);
  for (let i = 0; i < vector.length; i++) out[i] = vector[i] * scale;
  return out;
}

/** Dot product of two equally long vectors. */
export function dot(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let sum = 0;
  for (let i = 0; i < a.length; i++) sum += a[i] * b[i];
  return sum;
}

/** The refusal of a vector whose length differs from the model's stored vectors. */
export function dimensionMismatch(model: string, stored: number, given: number): ThreadkeepError {
  return new ThreadkeepError(
    "embedding_dimension_mismatch",
    `Embeddings of model "${model}" are stored with ${stored} dimensions, but this one has ${given}. ` +
      "Use another model name for a model with other dimensions, or re-embed (threadkeep reindex --force).",
    { details: { model, stored, given } },
  );
}

/** @throws `embedding_dimension_mismatch` when `given` differs from a known `stored` length. */
export function checkDimensions(model: string, stored: number | undefined, given: number): void {
  if (stored !== undefined && stored !== given) throw dimensionMismatch(model, stored, given);
  if (given === 0) throw new ThreadkeepError("invalid_request", "An embedding needs at least one dimension");
}

/** A vector as kept by the scanning stores: for one message (seq + createdAt), of one model, normalised. */
export interface StoredVector {
  seq: number;
  createdAt: number;
  model: string;
  vector: Float32Array;
}

/** The messages a query may return, given its seq bounds. */
export function inBounds(seq: number, query: Pick<VectorQuery, "beforeSeq" | "afterSeq">): boolean {
  return (
    (query.beforeSeq === undefined || seq < query.beforeSeq) && (query.afterSeq === undefined || seq > query.afterSeq)
  );
}

/** Keeps the best `limit` hits while scanning (a sorted array: limits are small). */
export class TopK {
  readonly hits: VectorHit[] = [];
  constructor(readonly limit: number = DEFAULT_SEARCH_LIMIT) {}

  /** The lowest score still worth computing a hit for. */
  get floor(): number {
    return this.hits.length < this.limit ? Number.NEGATIVE_INFINITY : this.hits[this.hits.length - 1].score;
  }

  add(hit: VectorHit): void {
    if (this.limit <= 0 || hit.score <= this.floor) return;
    let at = this.hits.length;
    while (at > 0 && this.hits[at - 1].score < hit.score) at--;
    this.hits.splice(at, 0, hit);
    if (this.hits.length > this.limit) this.hits.pop();
  }
}

/** A search hit for a message, its snippet the start of its text. */
export function vectorHit(sessionId: string, message: Message, score: number): VectorHit {
  const text = messageText(message);
  return { sessionId, seq: message.seq, snippet: text.length > 120 ? `${text.slice(0, 120)}…` : text, message, score };
}

/**
 * Scans one session's stored vectors against a normalised query: only vectors of the query's model
 * whose message still exists as embedded (same seq and createdAt). @throws on mixed dimensions.
 */
export function scanSession(
  sessionId: string,
  messages: readonly Message[],
  vectors: Iterable<StoredVector>,
  query: VectorQuery,
  normalizedQuery: Float32Array,
  top: TopK,
): void {
  const bySeq = new Map<number, Message>();
  for (const m of messages) bySeq.set(m.seq, m);
  for (const stored of vectors) {
    if (stored.model !== query.model || !inBounds(stored.seq, query)) continue;
    const message = bySeq.get(stored.seq);
    if (!message || message.createdAt !== stored.createdAt) continue;
    if (stored.vector.length !== normalizedQuery.length)
      throw dimensionMismatch(query.model, stored.vector.length, normalizedQuery.length);
    const score = dot(stored.vector, normalizedQuery);
    if (score > top.floor) top.add(vectorHit(sessionId, message, score));
  }
}

/** Seqs of `messages` without a current vector of `model`, oldest first. */
export function missingSeqs(
  messages: readonly Message[],
  vectors: Iterable<StoredVector>,
  model: string,
  limit: number,
): number[] {
  const have = new Map<number, number>();
  for (const v of vectors) if (v.model === model) have.set(v.seq, v.createdAt);
  const missing: number[] = [];
  for (const m of messages) {
    if (missing.length >= limit) break;
    if (have.get(m.seq) !== m.createdAt) missing.push(m.seq);
  }
  return missing;
}

/** A memory's vector as the scanning stores keep it: of one model, normalised, made from `text`. */
export interface StoredMemoryVector {
  model: string;
  /** The memory's text it was made from: once the text changes, the vector no longer counts. */
  text: string;
  vector: Float32Array;
}

/**
 * The vectors to keep for `items` (normalised), checked against each other and the user's vectors of
 * `model` already kept. @throws `embedding_dimension_mismatch`.
 */
export function memoryVectorsToKeep(
  model: string,
  items: readonly UserMemoryEmbeddingInput[],
  kept: Iterable<StoredMemoryVector | undefined>,
): Map<string, StoredMemoryVector> {
  let dims: number | undefined;
  for (const v of kept) if (v?.model === model) dims ??= v.vector.length;
  const out = new Map<string, StoredMemoryVector>();
  for (const item of items) {
    checkDimensions(model, dims, item.vector.length);
    dims = item.vector.length;
    out.set(item.id, { model, text: item.text, vector: normalize(item.vector) });
  }
  return out;
}

/** The memories without a vector of `model` for their current text, at most `limit`. */
export function missingMemoryVectors(
  memories: Iterable<Pick<UserMemory, "id" | "text">>,
  vectorOf: (id: string) => StoredMemoryVector | undefined,
  model: string,
  limit: number,
): { id: string; text: string }[] {
  const missing: { id: string; text: string }[] = [];
  for (const m of memories) {
    if (missing.length >= limit) break;
    const v = vectorOf(m.id);
    if (v?.model !== model || v.text !== m.text) missing.push({ id: m.id, text: m.text });
  }
  return missing;
}

/** The memories nearest the query among those with a current vector of its model, best first (ties by id). */
export function scanMemoryVectors(
  memories: Iterable<Pick<UserMemory, "id" | "text">>,
  vectorOf: (id: string) => StoredMemoryVector | undefined,
  query: UserMemoryVectorQuery,
): UserMemoryVectorHit[] {
  const q = normalize(query.vector);
  const hits: UserMemoryVectorHit[] = [];
  for (const m of memories) {
    const v = vectorOf(m.id);
    if (v?.model !== query.model || v.text !== m.text) continue;
    if (v.vector.length !== q.length) throw dimensionMismatch(query.model, v.vector.length, q.length);
    hits.push({ id: m.id, score: dot(v.vector, q) });
  }
  hits.sort((a, b) => b.score - a.score || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  return hits.slice(0, Math.max(0, Math.floor(query.limit ?? DEFAULT_SEARCH_LIMIT)));
}

/**
 * A float32 vector's numbers as text, comma-separated: nine significant digits give back every float32
 * exactly (the column is `real[]`), in about a third of the time and two thirds of the text of the
 * shortest double each (measured on 768 dimensions: 175 µs against 469 µs, 10.5 KB against 16.2 KB).
 */
export function float32Text(vector: Float32Array): string {
  let text = "";
  for (let i = 0; i < vector.length; i++) text += (i === 0 ? "" : ",") + vector[i].toPrecision(9);
  return text;
}
