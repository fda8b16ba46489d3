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
  /** Which index large owners' vectors are searched through (`/readyz` shows it), for stores that say. */
  describeVectorIndex?(): Promise<VectorIndexDescription>;
}

/** What {@link VectorStore.describeVectorIndex} answers: the index's kind and details of the store's own. */
export interface VectorIndexDescription {
  kind: string;
  [detail: string]: string;
}

/** True when the store keeps embeddings ({@link VectorStore}). */
export function canStoreVectors(store: SessionStore): store is VectorStore {
  return store.capabilities.vectors === true && typeof (store as Partial<VectorStore>).searchVectors === "function";
}

/** A memory's embedding, to store: made from `text`, the memory's text when it was embedded. */
export interface UserMemoryEmbeddingInput {
  id: string;
  /** The text the vector was made from: a memory whose text has changed since keeps no vector of it. */
  text: string;
  vector: ArrayLike<number>;
}

/** A nearest-neighbour search over one user's memory embeddings. */
export interface UserMemoryVectorQuery {
  userId: string;
  /** The embedding model: only vectors of this model are compared. */
  model: string;
  vector: ArrayLike<number>;
  /** @default 20 */
  limit?: number;
}

/** A memory close to a {@link UserMemoryVectorQuery}, best first. */
export interface UserMemoryVectorHit {
  id: string;
  /** Cosine similarity to the query, -1..1. */
  score: number;
}

/**
 * A store that keeps embeddings of memories about users beside them (with `capabilities.vectors`). A
 * memory has at most one vector: of one model, for its current text. The vector goes when the memory
 * goes (deleted, or its user erased), and stops counting when its text changes (until embedded again).
 */
export interface UserMemoryVectorStore {
  /**
   * Stores embeddings of `model` for the user's memories, replacing earlier ones; an item whose memory
   * is gone, or whose text is no longer `text`, is ignored.
   * @throws `embedding_dimension_mismatch` when a vector's length differs from the user's (or, on some
   * stores, the store's) vectors of `model`.
   */
  putUserMemoryEmbeddings(userId: string, model: string, items: UserMemoryEmbeddingInput[]): Promise<void>;
  /** The user's memories without a vector of `model` for their current text (at most `limit`), each with that text. */
  missingUserMemoryEmbeddings(userId: string, model: string, limit?: number): Promise<{ id: string; text: string }[]>;
  /** The user's memories most similar to the query by cosine similarity, best first. @throws `embedding_dimension_mismatch`. */
  searchUserMemoryVectors(query: UserMemoryVectorQuery): Promise<UserMemoryVectorHit[]>;
}

/** True when the store keeps embeddings of memories about users ({@link UserMemoryVectorStore}). */
export function canStoreMemoryVectors<S extends SessionStore>(store: S): store is S & UserMemoryVectorStore {
  const s = store as Partial<UserMemoryVectorStore> & SessionStore;
  return (
    s.capabilities.vectors === true &&
    typeof s.putUserMemoryEmbeddings === "function" &&
    typeof s.missingUserMemoryEmbeddings === "function" &&
    typeof s.searchUserMemoryVectors === "function"
  );
}
