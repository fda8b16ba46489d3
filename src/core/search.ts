/**
 * Search over one owner's messages in four modes: the store's own `substring` and `fulltext`, and
 * `semantic` (nearest embeddings) and `hybrid` (full-text and vector ranks fused), which need an
 * embedder. Ownership is part of every store query (`userId`), never a filter applied afterwards.
 */
import { ThreadkeepError } from "./errors.js";
import type { SearchHit, FullStore } from "./types.js";

/** How {@link Memory.search} matches. */
export type SearchMode = "substring" | "fulltext" | "semantic" | "hybrid";

/** The modes, in a form usable at run time. */
export const SEARCH_MODES: readonly SearchMode[] = ["substring", "fulltext", "semantic", "hybrid"];

/** A search hit, with the score it was ranked by where the mode has one. */
export interface RankedHit extends SearchHit {
  /** Cosine similarity (semantic) or fused reciprocal-rank score (hybrid). */
  score?: number;
}

/** What a semantic search needs: the query's vector, and the store's nearest messages to it. */
export interface VectorSearcher {
  search(
    store: FullStore,
    query: { userId: string; sessionId?: string; text: string; limit: number },
  ): Promise<RankedHit[]>;
}

/** A search across one owner's sessions (or one of them). */
export interface SearchRequest {
  userId: string;
  sessionId?: string;
  text: string;
  mode: SearchMode;
  limit: number;
  /** Sessions last active before this are left out (see `SearchQuery.activeSince`). */
  activeSince?: number;
}

/** The RRF constant: ranks past a few dozen add little, so one list's top hit cannot drown the other. */
export const RRF_K = 60;

/** Candidates taken from each list before fusing (more than the limit, so fusion has something to weigh). */
const FUSION_DEPTH = 50;

const hitKey = (hit: SearchHit) => `${hit.sessionId}\n${hit.seq}`;

/**
 * Reciprocal-rank fusion: each hit scores the sum of 1 / (k + rank) over the lists it appears in, so a
 * message both lists rank well beats one that only one list ranks first.
 */
export function fuseRanks(lists: readonly (readonly SearchHit[])[], limit: number, k = RRF_K): RankedHit[] {
  const fused = new Map<string, RankedHit>();
  for (const list of lists) {
    list.forEach((hit, rank) => {
      const key = hitKey(hit);
      const entry = fused.get(key) ?? { ...hit, score: 0 };
      entry.score = (entry.score ?? 0) + 1 / (k + rank + 1);
      fused.set(key, entry);
    });
  }
  return [...fused.values()].sort((a, b) => (b.score ?? 0) - (a.score ?? 0) || b.seq - a.seq).slice(0, limit);
}

/** The best mode a store (and embedder) offers: hybrid, then full text, then substring. */
export function bestSearchMode(store: FullStore, semantic: boolean): SearchMode {
  if (semantic) return "hybrid";
  return store.capabilities.fullTextSearch ? "fulltext" : "substring";
}

/**
 * The lexical ranking used inside hybrid search (and by lexical recall): the store's full text by relevance, or (where a store
 * has none) substring hits of each word, ranked by how many of the words a message holds.
 */
export async function lexicalRanks(store: FullStore, request: SearchRequest, depth: number): Promise<SearchHit[]> {
  const base = { userId: request.userId, sessionId: request.sessionId, text: request.text, activeSince: request.activeSince };
  if (store.capabilities.fullTextSearch)
    return store.search({ ...base, mode: "fulltext", ranking: "relevance", limit: depth });
  const words = [...new Set(request.text.toLowerCase().split(/[^\p{L}\p{N}]+/u).filter((w) => w.length > 2))];
  const counts = new Map<string, { hit: SearchHit; words: number }>();
  for (const word of words.slice(0, 8)) {
    for (const hit of await store.search({ ...base, text: word, limit: depth })) {
      const entry = counts.get(hitKey(hit)) ?? { hit, words: 0 };
      entry.words++;
      counts.set(hitKey(hit), entry);
    }
  }
  return [...counts.values()].sort((a, b) => b.words - a.words || b.hit.seq - a.hit.seq).map((e) => e.hit).slice(0, depth);
}

/** Runs a search. @throws `not_supported` for semantic or hybrid without embeddings. */
export async function runSearch(
  store: FullStore,
  request: SearchRequest,
  vectors?: VectorSearcher,
): Promise<RankedHit[]> {
  const { mode } = request;
  if (mode === "substring" || mode === "fulltext") {
    return store.search({ userId: request.userId, sessionId: request.sessionId, text: request.text, mode, limit: request.limit, activeSince: request.activeSince });
  }
  if (!vectors) {
    throw new ThreadkeepError(
      "not_supported",
      `Search mode "${mode}" needs embeddings: start threadkeep with --embedding-model (or pass an embedder)`,
      { details: { field: "mode" } },
    );
  }
  const query = { userId: request.userId, sessionId: request.sessionId, text: request.text, activeSince: request.activeSince };
  if (mode === "semantic") return vectors.search(store, { ...query, limit: request.limit });
  const depth = Math.max(FUSION_DEPTH, request.limit);
  const [lexical, semantic] = await Promise.all([
    lexicalRanks(store, request, depth),
    vectors.search(store, { ...query, limit: depth }),
  ]);
  return fuseRanks([lexical, semantic], request.limit);
}
