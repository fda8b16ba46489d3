/**
 * Message embeddings: the optional {@link VectorStore} extension of the store contract (`capabilities.vectors`).
 */
import type { SearchHit } from "./query-types.js";
import type { SessionStore } from "./store-types.js";

/** A message's embedding, to store. */
export interface EmbeddingInput {
  seq: number;
  /** The message's `createdAt`: a vector is only ever matched to the message it was made from. */
  createdAt: number;
  vector: ArrayLike<number>;
}

/** A nearest-neighbour search over one owner's message embeddings. */
export interface VectorQuery {
  /** Only this owner's sessions are searched (part of the query, never a filter afterwards). */
  userId: string;
  /** Restrict to one session. */
  sessionId?: string;
  /** The embedding model: only vectors of this model are compared. */
  model: string;
  vector: ArrayLike<number>;
  /** @default 20 */
  limit?: number;
  /** Only messages with `seq < beforeSeq` (recall: older than the window). */
  beforeSeq?: number;
  /** Only messages with `seq > afterSeq` (recall: newer than what a summary covers). */
  afterSeq?: number;
  /**
   * Leaves out sessions last active before this (ms since epoch), as expired: `Memory` passes now minus
   * its TTL, so a session past it is not found before a sweep deletes it. Unset: no expiry check.
   */
  activeSince?: number;
}

/** A vector search hit, best first. */
export interface VectorHit extends SearchHit {
  /** Cosine similarity to the query, -1..1. */
  score: number;
}

/**
 * A store that keeps message embeddings next to the messages (`capabilities.vectors`). A vector
 * belongs to one message (session, seq, createdAt) and one model; it goes when the message goes.
 */
export interface VectorStore extends SessionStore {
  /**
   * Stores embeddings of `model` (replacing earlier ones of those messages); vectors of messages that
   * no longer exist are ignored. @throws `embedding_dimension_mismatch` when a vector's length differs
   * from the vectors already stored for `model`.
   */
  putEmbeddings(sessionId: string, model: string, items: EmbeddingInput[]): Promise<void>;
  /** Seqs of the session's messages without an embedding of `model`, oldest first (at most `limit`). */
  missingEmbeddings(sessionId: string, model: string, limit?: number): Promise<number[]>;
  /** The most similar messages by cosine similarity, best first. @throws `embedding_dimension_mismatch`. */
  searchVectors(query: VectorQuery): Promise<VectorHit[]>;
}

/** True when the store keeps embeddings ({@link VectorStore}). */
export function canStoreVectors(store: SessionStore): store is VectorStore {
  return store.capabilities.vectors === true && typeof (store as Partial<VectorStore>).searchVectors === "function";
}
